package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/redisstore"
)

// neverCalled is a Provider that must not be reached: every request is refused before it.
type neverCalled struct{ calls atomic.Int64 }

func (p *neverCalled) Complete(context.Context, *llmclient.Call) (*llmclient.Response, error) {
	p.calls.Add(1)
	return &llmclient.Response{Text: "ok", FinishReason: finish.Stop}, nil
}

func (p *neverCalled) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, llmclient.ErrUnsupported
}

func hello() *llmclient.Request {
	return &llmclient.Request{Model: "m", Messages: []llmclient.Message{
		{Role: llmclient.RoleUser, Content: []llmclient.Part{llmclient.TextPart("hi")}}}}
}

// TestFailClosedRefusalsThroughClient: with FailClosed, every refusal a Client returns
// while Redis is away must wrap both ErrUnavailable and
// llmclient.ErrRateLimited — the first one, which waited for a real failure, and every
// later one, whether the store skips Redis after the failure (a long probe interval) or
// probes it on every call. The store used to wrap ErrRateLimited itself, which made the
// Client replace its error with a bare ErrRateLimited: only the first refusal kept
// ErrUnavailable, and only because its cause, the store's own timeout, looked like the
// caller's context deadline.
func TestFailClosedRefusalsThroughClient(t *testing.T) {
	const secret = "sk-failclosed-0123456789abcdef"
	limits := map[string]llmclient.Limits{
		"buckets": {RPM: 600, TPM: 100_000},
		"slots":   {MaxConcurrent: 2},
		"both":    {RPM: 600, TPM: 100_000, MaxConcurrent: 2},
	}
	for _, outage := range []string{"killed", "frozen"} {
		for _, probe := range []time.Duration{time.Hour, time.Nanosecond} {
			for name, lim := range limits {
				t.Run(outage+"/probe="+probe.String()+"/"+name, func(t *testing.T) {
					srv := startRedis(t)
					s := srv.store(redisstore.WithFailMode(redisstore.FailClosed),
						redisstore.WithTimeout(50*time.Millisecond), redisstore.WithProbeInterval(probe))
					p := &neverCalled{}
					c, err := llmclient.New(
						llmclient.WithUpstream(llmclient.Upstream{Name: "vendor", Provider: p, Keys: []string{secret}, Limits: lim}),
						llmclient.WithLimitStore(s),
						llmclient.WithBackoff(time.Millisecond, 2*time.Millisecond), // retries are not the subject
					)
					if err != nil {
						t.Fatal(err)
					}
					if outage == "killed" {
						srv.stop()
					} else {
						srv.freeze()
					}
					for i := range 4 {
						_, err := c.Complete(context.Background(), hello())
						switch {
						case err == nil:
							t.Fatalf("call %d: admitted while Redis is %s", i, outage)
						case !errors.Is(err, redisstore.ErrUnavailable) || !errors.Is(err, llmclient.ErrRateLimited):
							t.Fatalf("call %d: %v\nwants both ErrUnavailable (%v) and ErrRateLimited (%v)", i, err,
								errors.Is(err, redisstore.ErrUnavailable), errors.Is(err, llmclient.ErrRateLimited))
						case llmclient.ClassOf(err) != failure.RateLimited:
							t.Fatalf("call %d: class %v, want rate_limited", i, llmclient.ClassOf(err))
						case errors.Is(err, context.DeadlineExceeded):
							t.Fatalf("call %d: %v claims the caller's deadline passed; it has none", i, err)
						case strings.Contains(err.Error(), secret):
							t.Fatalf("call %d: the error shows the API key: %v", i, err)
						}
					}
					if n := p.calls.Load(); n != 0 {
						t.Fatalf("the upstream was called %d times while the store refused", n)
					}
				})
			}
		}
	}
}

// TestStoreTimeoutIsNotTheCallersDeadline: a call that outlasts the store's own timeout
// fails with ErrUnavailable, and not with context.DeadlineExceeded, which would tell the
// caller (and the Client, which passes context errors through unchanged) that its own
// context ran out.
func TestStoreTimeoutIsNotTheCallersDeadline(t *testing.T) {
	for _, mode := range []redisstore.FailMode{redisstore.FailOpen, redisstore.FailClosed} {
		t.Run(mode.String(), func(t *testing.T) {
			srv := startRedis(t)
			s := srv.store(redisstore.WithFailMode(mode), redisstore.WithTimeout(30*time.Millisecond))
			spec := limitstore.Spec{Requests: limitstore.Rate{PerSecond: 1, Burst: 10}, MaxConcurrent: 1, BatchShare: 1}
			st := s.Open("frozen", spec)
			srv.freeze()
			_, _, err := reserveWait(st, context.Background(), limitstore.Reservation{Requests: 1, MaxWait: -1})
			if mode == redisstore.FailOpen {
				if err != nil {
					t.Fatalf("FailOpen Reserve: %v, want a local admission", err)
				}
				return
			}
			if !errors.Is(err, redisstore.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Reserve: %v; want ErrUnavailable (%v) and not context.DeadlineExceeded (%v)",
					err, errors.Is(err, redisstore.ErrUnavailable), errors.Is(err, context.DeadlineExceeded))
			}
		})
	}
}
