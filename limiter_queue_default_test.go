package llmclient_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
)

// steadyUpstream answers every call after its latency (virtual time), counting the calls
// it answered.
type steadyUpstream struct {
	latency  time.Duration
	answered atomic.Int64
}

func (p *steadyUpstream) Complete(ctx context.Context, call *llmclient.Call) (*llmclient.Response, error) {
	select {
	case <-time.After(p.latency):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.answered.Add(1)
	return &llmclient.Response{Text: "ok", Usage: llmclient.Usage{InputTokens: 10, OutputTokens: 100, TotalTokens: 110}}, nil
}

func (*steadyUpstream) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, llmclient.ErrUnsupported
}

// bigReq is a request the limiter charges about 2,000 tokens.
func bigReq() *llmclient.Request {
	req := chatReq("m")
	req.MaxTokens = 2000
	return req
}

// TestImmediateResendDoesNotSpin: eight workers whose calls cannot fit before their 3 s
// deadlines (each charges 2 s of a 1,000 tokens/s key) send each refused call again at
// once, for 20 virtual seconds, with the default configuration. Every refusal is
// ErrRateLimited with an AdmitAfter; the limiter answers a bounded number of them a
// second (at once up to its allowance, then at the end of each tenth of a second), so
// virtual time moves on, the run ends, and the key's quota is still used.
func TestImmediateResendDoesNotSpin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &steadyUpstream{latency: 500 * time.Millisecond}
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: up,
			Limits: llmclient.Limits{TPM: 60_000}}))
		start := time.Now()
		const run = 20 * time.Second
		var refusals, noAdmitAfter atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for time.Since(start) < run {
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					_, err := c.Complete(ctx, bigReq())
					cancel()
					var e *llmclient.Error
					switch {
					case err == nil:
					case errors.Is(err, llmclient.ErrRateLimited) && errors.As(err, &e):
						if e.AdmitAfter <= 0 {
							noAdmitAfter.Add(1)
						}
						if refusals.Add(1) > 100_000 {
							t.Errorf("more than 100,000 refusals in %v of virtual time: the workers spin", time.Since(start))
							return
						}
					default:
						t.Errorf("call failed: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		t.Logf("%d refusals, %d answered in %v", refusals.Load(), up.answered.Load(), elapsed)
		// At once: 64 a tenth of a second; held: one per worker per tenth.
		if limit := int64(elapsed/(100*time.Millisecond)+1) * (64 + 8); refusals.Load() > limit {
			t.Errorf("%d refusals in %v, more than the %d the pacing allows", refusals.Load(), elapsed, limit)
		}
		if n := noAdmitAfter.Load(); n > 0 {
			t.Errorf("%d refusals without an AdmitAfter", n)
		}
		// The bucket holds 10,000 tokens and refills 1,000 a second: about 15 calls.
		if n := up.answered.Load(); n < 12 {
			t.Errorf("%d calls answered in %v, want the quota used (about 15)", n, elapsed)
		}
	})
}

// TestBurstThatFitsIsNotRefused: 30 calls at once of about 2,000 tokens each on a key of
// 60,000 TPM (a burst of 10,000 tokens) with 3-minute deadlines: the last waits about 50
// s, well before its deadline, so with the default configuration none is refused.
func TestBurstThatFitsIsNotRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &steadyUpstream{latency: 500 * time.Millisecond}
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: up,
			Limits: llmclient.Limits{TPM: 60_000}}))
		var wg sync.WaitGroup
		var failed atomic.Int64
		for range 30 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				if _, err := c.Complete(ctx, bigReq()); err != nil {
					failed.Add(1)
					t.Logf("refused: %v", err)
				}
			})
		}
		wg.Wait()
		if n := failed.Load(); n > 0 {
			t.Errorf("%d of 30 calls that fit before their deadlines failed", n)
		}
	})
}

// TestOverloadMovesCallsToAnUpstreamThatCanServe: arrivals at twice what upstream "a"'s
// key admits, 10 s deadlines, with "b" (no limits) behind it, default configuration:
// every call is served, by a or, once a's queue is full, by b at once; none fails while
// b could serve it.
func TestOverloadMovesCallsToAnUpstreamThatCanServe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := &steadyUpstream{latency: time.Second}, &steadyUpstream{latency: time.Second}
		c := newClient(t,
			llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: a, Limits: llmclient.Limits{TPM: 60_000}}),
			llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: b}))
		rng := rand.New(rand.NewPCG(1, 2))
		start := time.Now()
		var wg sync.WaitGroup
		var calls, failed atomic.Int64
		var slowest atomic.Int64
		for time.Since(start) < time.Minute {
			// a admits a 2,000-token call every 2 s: one a second is twice that.
			time.Sleep(time.Duration(rng.ExpFloat64() * float64(time.Second)))
			calls.Add(1)
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				began := time.Now()
				if _, err := c.Complete(ctx, bigReq()); err != nil {
					failed.Add(1)
					t.Errorf("call failed while b could serve it: %v", err)
				}
				for d := int64(time.Since(began)); ; {
					s := slowest.Load()
					if d <= s || slowest.CompareAndSwap(s, d) {
						break
					}
				}
			})
		}
		wg.Wait()
		t.Logf("%d calls: a answered %d, b %d, failed %d, slowest %v", calls.Load(), a.answered.Load(), b.answered.Load(),
			failed.Load(), time.Duration(slowest.Load()))
		if a.answered.Load() < 25 || b.answered.Load() == 0 {
			t.Errorf("a answered %d (its key admits about 35 in a minute), b %d: want both used", a.answered.Load(), b.answered.Load())
		}
	})
}
