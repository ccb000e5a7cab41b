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
	"github.com/stretchr/testify/assert"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClassOf(t *testing.T) {
	vendor := func(c llmclient.Class) error { return &llmclient.Error{Class: c, Status: 400} }
	cases := []struct {
		name string
		err  error
		want llmclient.Class
	}{
		{"nil", nil, llmclient.ClassNone},
		{"plain error", errors.New("boom"), llmclient.ClassUnknown},
		{"context canceled", context.Canceled, llmclient.ClassCanceled},
		{"context deadline", context.DeadlineExceeded, llmclient.ClassTimeout},
		{"wrapped canceled", fmt.Errorf("calling: %w", context.Canceled), llmclient.ClassCanceled},
		{"url.Error timeout", &url.Error{Op: "Post", URL: "http://127.0.0.1/v1", Err: timeoutErr{}}, llmclient.ClassTimeout},
		{"url.Error deadline", &url.Error{Op: "Post", URL: "http://127.0.0.1/v1", Err: context.DeadlineExceeded}, llmclient.ClassTimeout},
		{"url.Error canceled", &url.Error{Op: "Post", URL: "http://127.0.0.1/v1", Err: context.Canceled}, llmclient.ClassCanceled},
		{"os deadline", os.ErrDeadlineExceeded, llmclient.ClassTimeout},
		{"net.OpError refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, llmclient.ClassNetwork},
		{"net.OpError reset", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, llmclient.ClassNetwork},
		{"net.OpError timeout", &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}, llmclient.ClassTimeout},
		{"DNS", &url.Error{Op: "Post", URL: "http://x.invalid", Err: &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}}, llmclient.ClassNetwork},
		{"bare ECONNRESET", fmt.Errorf("write: %w", syscall.ECONNRESET), llmclient.ClassNetwork},
		{"unexpected EOF", io.ErrUnexpectedEOF, llmclient.ClassNetwork},
		{"EOF before a response", &url.Error{Op: "Post", URL: "http://127.0.0.1/v1", Err: io.EOF}, llmclient.ClassNetwork},
		{"circuit open", llmclient.ErrCircuitOpen, llmclient.ClassUnavailable},
		{"no key", fmt.Errorf("x: %w", llmclient.ErrNoKey), llmclient.ClassUnavailable},
		{"local rate limit", llmclient.ErrRateLimited, llmclient.ClassRateLimited},
		{"first-token timeout", llmclient.ErrFirstTokenTimeout, llmclient.ClassTimeout},
		{"idle timeout", llmclient.ErrIdleTimeout, llmclient.ClassTimeout},
		{"attempt timeout", llmclient.ErrAttemptTimeout, llmclient.ClassTimeout},
		{"stream interrupted", llmclient.ErrStreamInterrupted, llmclient.ClassStreamInterrupted},
		{"wrapped *Error", fmt.Errorf("ctx: %w", vendor(llmclient.ClassContextLength)), llmclient.ClassContextLength},
		{"*Error wins over its cause", &llmclient.Error{Class: llmclient.ClassQuotaExhausted, Err: context.Canceled}, llmclient.ClassQuotaExhausted},
		{"*Error without class uses its cause", &llmclient.Error{Err: syscall.ECONNREFUSED}, llmclient.ClassNetwork},
		{"joined", errors.Join(errors.New("a"), vendor(llmclient.ClassAuth)), llmclient.ClassAuth},
	}
	for c := llmclient.ClassUnknown; c <= llmclient.ClassUnavailable; c++ {
		cases = append(cases, struct {
			name string
			err  error
			want llmclient.Class
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
	for c := llmclient.ClassUnknown; c <= llmclient.ClassUnavailable; c++ {
		name := c.String()
		assert.NotEmpty(t, name)
		assert.False(t, seen[name], "duplicate class name %q", name)
		seen[name] = true
	}
	assert.Equal(t, "none", llmclient.ClassNone.String())
	// Spot-check the table of DESIGN.md.
	assert.Equal(t, llmclient.Decision{Retry: true, NextKey: true, Failover: true, Cooldown: true}, llmclient.DefaultDecision(llmclient.ClassRateLimited))
	assert.Equal(t, llmclient.Decision{NextKey: true, Failover: true, Evict: true, Alert: true}, llmclient.DefaultDecision(llmclient.ClassQuotaExhausted))
	assert.Equal(t, llmclient.Decision{}, llmclient.DefaultDecision(llmclient.ClassBadRequest))
	assert.True(t, llmclient.DefaultDecision(llmclient.ClassOverloaded).Breaker)
	assert.False(t, llmclient.DefaultDecision(llmclient.ClassRateLimited).Breaker)
	assert.True(t, llmclient.DefaultDecision(llmclient.ClassStreamInterrupted).Breaker)
}

func TestErrorMessage(t *testing.T) {
	e := &llmclient.Error{Class: llmclient.ClassRateLimited, Upstream: "openai", Status: 429,
		Code: "rate_limit_exceeded", Message: "slow down", Attempts: make([]llmclient.Attempt, 3), Err: llmclient.ErrRateLimited}
	assert.Equal(t, `llmclient: rate_limited: upstream "openai": status 429: rate_limit_exceeded: slow down (3 attempts): rate limited locally`, e.Error())
	assert.ErrorIs(t, e, llmclient.ErrRateLimited)
	assert.True(t, e.Temporary())
}
