package llmclient_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/stretchr/testify/assert"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClassOf(t *testing.T) {
	vendor := func(c failure.Class) error { return &llmclient.Error{Class: c, Status: 400} }
	cases := []struct {
		name string
		err  error
		want failure.Class
	}{
		{"nil", nil, failure.None},
		{"plain error", errors.New("boom"), failure.Unknown},
		{"context canceled", context.Canceled, failure.Canceled},
		{"context deadline", context.DeadlineExceeded, failure.Timeout},
		{"wrapped canceled", fmt.Errorf("calling: %w", context.Canceled), failure.Canceled},
		{"url.Error timeout", &url.Error{Op: "Post", URL: "http://127.0.0.1/v1", Err: timeoutErr{}}, failure.Timeout},
		{"url.Error deadline", &url.Error{Op: "Post", URL: "http://127.0.0.1/v1", Err: context.DeadlineExceeded}, failure.Timeout},
		{"url.Error canceled", &url.Error{Op: "Post", URL: "http://127.0.0.1/v1", Err: context.Canceled}, failure.Canceled},
		{"os deadline", os.ErrDeadlineExceeded, failure.Timeout},
		{"net.OpError refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, failure.Network},
		{"net.OpError reset", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, failure.Network},
		{"net.OpError timeout", &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}, failure.Timeout},
		{"DNS", &url.Error{Op: "Post", URL: "http://x.invalid", Err: &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}}, failure.Network},
		{"bare ECONNRESET", fmt.Errorf("write: %w", syscall.ECONNRESET), failure.Network},
		{"unexpected EOF", io.ErrUnexpectedEOF, failure.Network},
		{"EOF before a response", &url.Error{Op: "Post", URL: "http://127.0.0.1/v1", Err: io.EOF}, failure.Network},
		{"circuit open", llmclient.ErrCircuitOpen, failure.Unavailable},
		{"no key", fmt.Errorf("x: %w", llmclient.ErrNoKey), failure.Unavailable},
		{"local rate limit", llmclient.ErrRateLimited, failure.RateLimited},
		{"first-token timeout", llmclient.ErrFirstTokenTimeout, failure.Timeout},
		{"idle timeout", llmclient.ErrIdleTimeout, failure.Timeout},
		{"attempt timeout", llmclient.ErrAttemptTimeout, failure.Timeout},
		{"stream interrupted", llmclient.ErrStreamInterrupted, failure.StreamInterrupted},
		{"wrapped *Error", fmt.Errorf("ctx: %w", vendor(failure.ContextLength)), failure.ContextLength},
		{"*Error wins over its cause", &llmclient.Error{Class: failure.QuotaExhausted, Err: context.Canceled}, failure.QuotaExhausted},
		{"*Error without class uses its cause", &llmclient.Error{Err: syscall.ECONNREFUSED}, failure.Network},
		{"joined", errors.Join(errors.New("a"), vendor(failure.Auth)), failure.Auth},
	}
	for c := failure.Unknown; c <= failure.Unavailable; c++ {
		cases = append(cases, struct {
			name string
			err  error
			want failure.Class
		}{"class " + c.String(), vendor(c), c})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, llmclient.ClassOf(tc.err))
		})
	}
}

func TestClassNamesAndDefaultDecisions(t *testing.T) {
	seen := map[string]bool{}
	for c := failure.Unknown; c <= failure.Unavailable; c++ {
		name := c.String()
		assert.NotEmpty(t, name)
		assert.False(t, seen[name], "duplicate class name %q", name)
		seen[name] = true
	}
	assert.Equal(t, "none", failure.None.String())
	// Spot-check the table of DESIGN.md.
	assert.Equal(t, llmclient.Decision{Retry: true, NextKey: true, Failover: true, Cooldown: true}, llmclient.DefaultDecision(failure.RateLimited))
	assert.Equal(t, llmclient.Decision{NextKey: true, Failover: true, Evict: true, Alert: true}, llmclient.DefaultDecision(failure.QuotaExhausted))
	assert.Equal(t, llmclient.Decision{}, llmclient.DefaultDecision(failure.BadRequest))
	assert.True(t, llmclient.DefaultDecision(failure.Overloaded).Breaker)
	assert.False(t, llmclient.DefaultDecision(failure.RateLimited).Breaker)
	assert.True(t, llmclient.DefaultDecision(failure.StreamInterrupted).Breaker)
}

func TestErrorMessage(t *testing.T) {
	e := &llmclient.Error{Class: failure.RateLimited, Upstream: "openai", Status: 429,
		Code: "rate_limit_exceeded", Message: "slow down", Attempts: make([]llmclient.Attempt, 3), Err: llmclient.ErrRateLimited}
	assert.Equal(t, `llmclient: rate_limited: upstream "openai": status 429: rate_limit_exceeded: slow down (3 attempts): rate limited locally`, e.Error())
	assert.ErrorIs(t, e, llmclient.ErrRateLimited)
	assert.True(t, e.Temporary())
}
