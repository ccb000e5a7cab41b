package bench

import (
	"context"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/ratelimiter"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/failsafe-go/failsafe-go/timeout"
	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/finish"
)

// noop is a provider that answers at once with a fresh response: the "no-op call" both
// contenders wrap, so the benchmark measures the layers, not the adapter.
type noop struct{}

func (noop) Complete(context.Context, *llmclient.Call) (*llmclient.Response, error) {
	return &llmclient.Response{Text: "ok", FinishReason: finish.Stop}, nil
}

func (noop) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, llmclient.ErrUnsupported
}

var req = &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("Say hello.")}}

// newLLMClient builds a Client with every layer active: a key pool, RPM/TPM/concurrency
// limits far above what the benchmark offers, the breaker, retry with its budget, the
// per-attempt timeout.
func newLLMClient(b *testing.B, p llmclient.Provider, opts ...llmclient.Option) *llmclient.Client {
	c, err := llmclient.New(append(opts, llmclient.WithUpstream(llmclient.Upstream{
		Name: "a", Provider: p, Keys: []string{"k1", "k2"},
		Limits: llmclient.Limits{RPM: 1 << 40, TPM: 1 << 50, MaxConcurrent: 1 << 20},
	}))...)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// newFailsafe builds a failsafe-go executor of retry + circuit breaker + rate limiter +
// timeout, outer to inner, around the same call.
func newFailsafe() failsafe.Executor[*llmclient.Response] {
	rp := retrypolicy.NewBuilder[*llmclient.Response]().WithMaxRetries(2).WithBackoff(500*time.Millisecond, 30*time.Second).Build()
	cb := circuitbreaker.NewBuilder[*llmclient.Response]().WithFailureThresholdRatio(10, 20).WithDelay(15 * time.Second).Build()
	rl := ratelimiter.NewBursty[*llmclient.Response](1<<31, time.Second)
	to := timeout.New[*llmclient.Response](10 * time.Minute)
	return failsafe.With[*llmclient.Response](rp, cb, rl, to)
}

func BenchmarkComplete(b *testing.B) {
	ctx := context.Background()
	b.Run("adapter-only", func(b *testing.B) {
		var p noop
		call := &llmclient.Call{Request: req, Model: "m"}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Complete(ctx, call); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("llmclient", func(b *testing.B) {
		c := newLLMClient(b, noop{})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Complete(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("llmclient-with-deadline", func(b *testing.B) {
		// The caller's context has a deadline: no time budget of the Client's own.
		c := newLLMClient(b, noop{})
		dctx, cancel := context.WithTimeout(ctx, time.Hour)
		defer cancel()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Complete(dctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("llmclient-no-budget", func(b *testing.B) {
		// WithCallBudget(0): a call without a deadline is bounded by nothing of the Client's.
		c := newLLMClient(b, noop{}, llmclient.WithCallBudget(0))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Complete(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("llmclient-with-attempt-timeout", func(b *testing.B) {
		c := newLLMClient(b, noop{}, llmclient.WithAttemptTimeout(10*time.Minute))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Complete(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("failsafe-go", func(b *testing.B) {
		var p noop
		call := &llmclient.Call{Request: req, Model: "m"}
		ex := newFailsafe()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ex.Get(func() (*llmclient.Response, error) { return p.Complete(ctx, call) }); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkCompleteParallel(b *testing.B) {
	ctx := context.Background()
	b.Run("adapter-only", func(b *testing.B) {
		var p noop
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			call := &llmclient.Call{Request: req, Model: "m"}
			for pb.Next() {
				if _, err := p.Complete(ctx, call); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("llmclient", func(b *testing.B) {
		c := newLLMClient(b, noop{})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.Complete(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("failsafe-go", func(b *testing.B) {
		var p noop
		ex := newFailsafe()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			call := &llmclient.Call{Request: req, Model: "m"}
			for pb.Next() {
				if _, err := ex.Get(func() (*llmclient.Response, error) { return p.Complete(ctx, call) }); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
