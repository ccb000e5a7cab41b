package llmclient_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fault matrix: one test per row, asserting attempts, key and upstream switches, the
// final class and the total virtual time.

func TestFault429WithRetryAfterWaitsThenSucceeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Fail(429).RetryAfter(2*time.Second).Code("rate_limit_exceeded"), fake.Reply("ok"))
		c := newClient(t, up("a", p))
		var resp *llmclient.Response
		var err error
		d := elapsed(func() { resp, err = c.Complete(context.Background(), chatReq("m")) })
		require.NoError(t, err)
		assert.Equal(t, "ok", resp.Text)
		assert.Equal(t, 2, p.Calls())
		require.Len(t, resp.Attempts, 2)
		assert.Equal(t, failure.RateLimited, resp.Attempts[0].Class)
		assert.Equal(t, 2*time.Second, resp.Attempts[0].RetryAfter)
		// Retry-After plus at most 10% jitter, never earlier.
		assert.GreaterOrEqual(t, d, 2*time.Second)
		assert.LessOrEqual(t, d, 2200*time.Millisecond)
		assert.False(t, resp.Fallback)
	})
}

func TestFault429WithoutRetryAfterBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Fail(429), fake.Reply("ok"))
		c := newClient(t, up("a", p))
		var err error
		d := elapsed(func() { _, err = c.Complete(context.Background(), chatReq("m")) })
		require.NoError(t, err)
		assert.Equal(t, 2, p.Calls())
		// The first backoff is 500ms ± 50%.
		assert.GreaterOrEqual(t, d, 250*time.Millisecond)
		assert.LessOrEqual(t, d, 750*time.Millisecond)
	})
}

func TestFault429RetryAfterBeyondDeadlineFailsOverAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Fail(429).RetryAfter(30 * time.Second))
		b := fake.New(fake.Reply("from b"))
		c := newClient(t, up("a", a), up("b", b))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var resp *llmclient.Response
		var err error
		d := elapsed(func() { resp, err = c.Complete(ctx, chatReq("m")) })
		require.NoError(t, err)
		assert.Equal(t, time.Duration(0), d, "no wait may start that cannot end before the deadline")
		assert.Equal(t, []string{"a", "b"}, upstreamsOf(resp.Attempts))
		assert.Equal(t, "b", resp.Upstream)
		assert.True(t, resp.Fallback)
	})
}

func TestFault429RetryAfterBeyondDeadlineSingleUpstreamReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Fail(429).RetryAfter(30 * time.Second))
		c := newClient(t, up("a", a))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		d := elapsed(func() { _, err = c.Complete(ctx, chatReq("m")) })
		assert.Equal(t, failure.RateLimited, llmclient.ClassOf(err))
		assert.Equal(t, time.Duration(0), d)
		assert.Equal(t, 1, a.Calls())
	})
}

func TestFaultQuotaExhaustedEvictsKeyAndFailsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Fail(429).Type("insufficient_quota").Code("insufficient_quota").Class(failure.QuotaExhausted))
		b := fake.New(fake.Reply("from b").Times(2))
		var log eventLog
		c := newClient(t, up("a", a, "sk-a"), up("b", b), llmclient.WithObserver(log.observe))
		var resp *llmclient.Response
		var err error
		d := elapsed(func() { resp, err = c.Complete(context.Background(), chatReq("m")) })
		require.NoError(t, err)
		assert.Zero(t, d, "quota exhausted is never retried or waited on")
		assert.Equal(t, []string{"a", "b"}, upstreamsOf(resp.Attempts))
		assert.Equal(t, 1, a.Calls())
		ev := log.kinds(event.KeyEvicted)
		require.Len(t, ev, 1)
		assert.Equal(t, "key#1", ev[0].Key)
		assert.Len(t, log.kinds(event.Alert), 1)

		// The evicted key's upstream is skipped without a call afterwards.
		resp, err = c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "b", resp.Upstream)
		assert.Equal(t, 1, a.Calls())
	})
}

func TestFault503BacksOffThenFailsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Fail(503).Forever())
		b := fake.New(fake.Reply("from b"))
		c := newClient(t, up("a", a), up("b", b))
		var resp *llmclient.Response
		var err error
		d := elapsed(func() { resp, err = c.Complete(context.Background(), chatReq("m")) })
		require.NoError(t, err)
		assert.Equal(t, []string{"a", "a", "a", "b"}, upstreamsOf(resp.Attempts))
		// Two backoffs on a: ~500ms and ~1s, each ±50%; none before failing over.
		assert.GreaterOrEqual(t, d, 750*time.Millisecond)
		assert.LessOrEqual(t, d, 2250*time.Millisecond)
		assert.Equal(t, failure.Overloaded, resp.Attempts[0].Class, "503 is the vendors' overload signal")
	})
}

func TestFaultAttemptTimeoutRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("slow").Latency(time.Minute), fake.Reply("ok"))
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Timeout: 5 * time.Second}))
		var resp *llmclient.Response
		var err error
		d := elapsed(func() { resp, err = c.Complete(context.Background(), chatReq("m")) })
		require.NoError(t, err)
		assert.Equal(t, "ok", resp.Text)
		require.Len(t, resp.Attempts, 2)
		assert.Equal(t, failure.Timeout, resp.Attempts[0].Class)
		assert.ErrorIs(t, resp.Attempts[0].Err, llmclient.ErrAttemptTimeout)
		// A hang is not overload: the last upstream is retried at once, without a backoff.
		assert.Equal(t, 5*time.Second, d)
	})
}

func TestFaultConnectionRefusedAndResetRetry(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Error(refused), fake.Error(reset), fake.Reply("ok"))
		c := newClient(t, up("a", p))
		var resp *llmclient.Response
		var err error
		d := elapsed(func() { resp, err = c.Complete(context.Background(), chatReq("m")) })
		require.NoError(t, err)
		require.Len(t, resp.Attempts, 3)
		assert.Equal(t, failure.Network, resp.Attempts[0].Class)
		assert.Equal(t, failure.Network, resp.Attempts[1].Class)
		assert.GreaterOrEqual(t, d, 750*time.Millisecond) // two backoffs
		assert.LessOrEqual(t, d, 2250*time.Millisecond)
	})
}

func TestFaultBadRequestReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Fail(400).Code("invalid_value").Message("bad temperature"))
		b := fake.New(fake.Reply("never"))
		c := newClient(t, up("a", a), up("b", b))
		var err error
		d := elapsed(func() { _, err = c.Complete(context.Background(), chatReq("m")) })
		require.Error(t, err)
		assert.Equal(t, failure.BadRequest, llmclient.ClassOf(err))
		assert.Zero(t, d)
		assert.Equal(t, 1, a.Calls())
		assert.Equal(t, 0, b.Calls())
		var e *llmclient.Error
		require.ErrorAs(t, err, &e)
		assert.Len(t, e.Attempts, 1)
		assert.Equal(t, 400, e.Status)
	})
}

func TestFaultContextLengthGoesOnlyToLargerContextUpstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Without a configured fallback, the error is returned at once.
		a := fake.New(fake.FailClass(failure.ContextLength).Status(400).Code("context_length_exceeded"))
		b := fake.New(fake.Reply("never"))
		c := newClient(t, up("a", a), up("b", b))
		_, err := c.Complete(context.Background(), chatReq("m"))
		assert.Equal(t, failure.ContextLength, llmclient.ClassOf(err))
		assert.Equal(t, 0, b.Calls())

		// With one, only the larger-context upstream is tried.
		a = fake.New(fake.FailClass(failure.ContextLength).Status(400).Code("context_length_exceeded"))
		b = fake.New(fake.Reply("never"))
		big := fake.New(fake.Reply("long answer"))
		c = newClient(t, up("a", a), up("b", b), up("big", big), llmclient.WithModelGroup("m", "a", "b"),
			llmclient.WithContextFallback("big"))
		resp, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, []string{"a", "big"}, upstreamsOf(resp.Attempts))
		assert.Equal(t, 0, b.Calls())
		assert.True(t, resp.Fallback)
	})
}

func TestFaultContentFilter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Reply("").Finish(finish.ContentFilter).Times(2))
		b := fake.New(fake.Reply("never"))
		c := newClient(t, up("a", a), up("b", b))
		_, err := c.Complete(context.Background(), chatReq("m"))
		assert.Equal(t, failure.ContentFiltered, llmclient.ClassOf(err))
		var e *llmclient.Error
		require.ErrorAs(t, err, &e)
		require.NotNil(t, e.Partial)
		assert.Equal(t, finish.ContentFilter, e.Partial.FinishReason)
		assert.Equal(t, 1, a.Calls())
		assert.Equal(t, 0, b.Calls())

		lenient := fake.New(fake.Reply("answer"))
		c = newClient(t, up("a", a), up("b", b), up("lenient", lenient), llmclient.WithModelGroup("m", "a", "b"),
			llmclient.WithContentFallback("lenient"))
		resp, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, []string{"a", "lenient"}, upstreamsOf(resp.Attempts))
	})
}

func TestFault401SwitchesKeyOrReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Func(func(call *llmclient.Call) fake.Step {
			if call.APIKey == "sk-revoked" {
				return fake.Fail(401).Code("invalid_api_key")
			}
			return fake.Reply("ok")
		}).Forever())
		c := newClient(t, up("a", p, "sk-revoked", "sk-good"))
		var resp *llmclient.Response
		var err error
		d := elapsed(func() { resp, err = c.Complete(context.Background(), chatReq("m")) })
		require.NoError(t, err)
		assert.Zero(t, d, "a key switch happens at once")
		// Least-in-flight picks key#1 first (ties go to the first key).
		assert.Equal(t, []string{"key#1", "key#2"}, []string{resp.Attempts[0].Key, resp.Attempts[1].Key})
		assert.Equal(t, failure.Auth, resp.Attempts[0].Class)

		// A single revoked key: returned at once, no retry, no failover.
		single := fake.New(fake.Fail(401).Forever())
		other := fake.New(fake.Reply("never"))
		c = newClient(t, up("a", single, "sk-revoked"), up("b", other))
		_, err = c.Complete(context.Background(), chatReq("m"))
		assert.Equal(t, failure.Auth, llmclient.ClassOf(err))
		assert.Equal(t, 1, single.Calls())
		assert.Equal(t, 0, other.Calls())
	})
}

func TestFault529OverloadedRetriesWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Fail(529).Type("overloaded_error").Times(2), fake.Reply("ok"))
		c := newClient(t, up("a", p))
		var resp *llmclient.Response
		var err error
		d := elapsed(func() { resp, err = c.Complete(context.Background(), chatReq("m")) })
		require.NoError(t, err)
		require.Len(t, resp.Attempts, 3)
		assert.Equal(t, failure.Overloaded, resp.Attempts[0].Class)
		assert.GreaterOrEqual(t, d, 750*time.Millisecond)
		assert.LessOrEqual(t, d, 2250*time.Millisecond)
	})
}

func TestFaultShouldRetryHeaderOverrides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Fail(500).ShouldRetry(false), fake.Reply("never"))
		c := newClient(t, up("a", p))
		_, err := c.Complete(context.Background(), chatReq("m"))
		assert.Equal(t, failure.ServerError, llmclient.ClassOf(err))
		assert.Equal(t, 1, p.Calls())

		p = fake.New(fake.Fail(400).ShouldRetry(true), fake.Reply("ok"))
		c = newClient(t, up("a", p))
		_, err = c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, 2, p.Calls())
	})
}

func TestFaultCallerCancelStopsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Fail(503).Forever())
		c := newClient(t, up("a", p))
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		_, err := c.Complete(ctx, chatReq("m"))
		assert.Equal(t, failure.Canceled, llmclient.ClassOf(err))
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, 1, p.Calls())
	})
}

func TestFaultAllUpstreamsFailNamesEach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Fail(503).Forever())
		b := fake.New(fake.Fail(529).Forever())
		c := newClient(t, up("a", a), up("b", b), llmclient.WithMaxAttempts(1))
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.Error(t, err)
		msg := err.Error()
		assert.Contains(t, msg, `upstream "a": status 503`)
		assert.Contains(t, msg, `upstream "b": status 529`)
		var e *llmclient.Error
		require.ErrorAs(t, err, &e)
		assert.Len(t, e.Attempts, 2)
		assert.Equal(t, failure.Overloaded, e.Class)
	})
}

func TestFaultFinalFallbackIsDegraded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Fail(500).Forever())
		c := newClient(t, up("a", a), llmclient.WithMaxAttempts(2),
			llmclient.WithFallback(func(ctx context.Context, req *llmclient.Request, err error) (*llmclient.Response, error) {
				if llmclient.ClassOf(err) != failure.ServerError {
					return nil, errors.New("unexpected")
				}
				return &llmclient.Response{Text: "cached answer"}, nil
			}))
		resp, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "cached answer", resp.Text)
		assert.True(t, resp.Degraded)
		assert.True(t, resp.Fallback)
		assert.Len(t, resp.Attempts, 2)
	})
}

var _ = io.EOF
