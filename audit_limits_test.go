package llmclient_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/ratelimit"
)

// Claims of docs/limits.md and README's defaults table, through the public API.

// TestAuditQuotaScopeIsSharedByKeysAndUpstreams: "Several keys of one Gemini project then
// add no capacity": a scope named by two upstreams, one with two keys, admits its burst
// once in total, whichever key or upstream a call goes to; a model the scope does not
// cover is not limited by it; after the refill the scope admits again.
func TestAuditQuotaScopeIsSharedByKeysAndUpstreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Reply("a").Forever())
		b := fake.New(fake.Reply("b").Forever())
		c := newClient(t,
			llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: a, Keys: []string{"k1", "k2"}, QuotaScopes: []string{"proj"}}),
			llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: b, QuotaScopes: []string{"proj"}}),
			llmclient.WithQuotaScope(llmclient.QuotaScope{Name: "proj", Models: []string{"gemini-*"},
				Limits: llmclient.Limits{RPM: 6, RequestBurst: 2}}),
			llmclient.WithLimiterMode(ratelimit.FailFast))
		served, refused := 0, 0
		for range 6 {
			_, err := c.Complete(context.Background(), chatReq("gemini-2.5-flash"))
			switch {
			case err == nil:
				served++
			case errors.Is(err, llmclient.ErrRateLimited):
				refused++
			default:
				t.Fatalf("covered model: %v", err)
			}
		}
		if served != 2 || refused != 4 {
			t.Errorf("covered model, scope burst 2 over 3 keys on 2 upstreams: %d served, %d refused; want 2 and 4", served, refused)
		}
		for range 10 {
			if _, err := c.Complete(context.Background(), chatReq("other-model")); err != nil {
				t.Fatalf("a model the scope does not cover: %v", err)
			}
		}
		time.Sleep(10 * time.Second) // RPM 6: one request back every 10 s
		if _, err := c.Complete(context.Background(), chatReq("gemini-2.5-pro")); err != nil {
			t.Errorf("after the refill: %v", err)
		}
	})
}

// TestAuditDailyQuotaRefusesAtOnceAndFailsOver: "a spent daily quota refuses at once when
// the request has a deadline", through the Client: alone, the call returns ErrRateLimited
// without waiting; with a backup, it is served there at once.
func TestAuditDailyQuotaRefusesAtOnceAndFailsOver(t *testing.T) {
	for _, l := range []llmclient.Limits{{RPD: 2}, {TPD: 2_500}} {
		synctest.Test(t, func(t *testing.T) {
			req := func() *llmclient.Request { r := chatReq("m"); r.MaxTokens = 1000; return r }
			solo := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Reply("a").Forever()), Limits: l}))
			pair := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Reply("a").Forever()), Limits: l}),
				up("b", fake.New(fake.Reply("b").Forever())))
			for _, c := range []*llmclient.Client{solo, pair} {
				for range 2 {
					if _, err := c.Complete(context.Background(), req()); err != nil {
						t.Fatalf("%+v: within the daily quota: %v", l, err)
					}
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			var err error
			if d := elapsed(func() { _, err = solo.Complete(ctx, req()) }); !errors.Is(err, llmclient.ErrRateLimited) || d != 0 {
				t.Errorf("%+v: spent daily quota, one upstream: err %v after %v; want ErrRateLimited at once", l, err, d)
			}
			var resp *llmclient.Response
			if d := elapsed(func() { resp, err = pair.Complete(ctx, req()) }); err != nil || resp.Upstream != "b" || d != 0 {
				t.Errorf("%+v: spent daily quota with a backup: %v, err %v after %v; want b at once", l, upstreamOf(resp), err, d)
			}
		})
	}
}

// TestAuditRetryAfterPausesAKeyAtMostTheEviction: "a Retry-After pauses a key for at most
// WithKeyEviction": after a 429 asking for a day, the next call on that key (nowhere else
// to go, no deadline: it waits the pause out) starts within the eviction time.
func TestAuditRetryAfterPausesAKeyAtMostTheEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Fail(429).RetryAfter(24*time.Hour), fake.Reply("ok").Forever())
		c := newClient(t, up("a", p, "k1"), llmclient.WithKeyEviction(2*time.Minute), llmclient.WithCallBudget(0))
		if _, err := c.Complete(context.Background(), chatReq("m")); err == nil {
			t.Fatal("a Retry-After of a day beyond WithMaxRetryAfter: want the call to give up")
		}
		var err error
		d := elapsed(func() { _, err = c.Complete(context.Background(), chatReq("m")) })
		if err != nil || d > 2*time.Minute {
			t.Errorf("next call: err %v after %v; want served within the 2m eviction", err, d)
		}
	})
}

// queueRun sends arrivals at twice a key's rate for a minute with 10 s deadlines and
// returns the latencies of the served calls and the number refused.
func queueRun(t *testing.T, opts ...llmclient.Option) (served []time.Duration, refused int) {
	up := &steadyUpstream{latency: time.Second}
	c := newClient(t, append([]llmclient.Option{llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: up,
		Limits: llmclient.Limits{TPM: 60_000}})}, opts...)...)
	rng := rand.New(rand.NewPCG(3, 4))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for start := time.Now(); time.Since(start) < time.Minute; {
		time.Sleep(time.Duration(rng.ExpFloat64() * float64(time.Second)))
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			began := time.Now()
			_, err := c.Complete(ctx, bigReq())
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused++
				return
			}
			served = append(served, time.Since(began))
		})
	}
	wg.Wait()
	return served, refused
}

// TestAuditQueueingIsBoundedByDefault: README's defaults table says queueing under
// sustained overload is bounded by default (target 100 ms) and WithQueueTarget(0) makes
// it first come first served within the deadline. At twice the key's rate, the served
// calls' median latency is about the unloaded one by default, and most of the deadline
// with the target off.
func TestAuditQueueingIsBoundedByDefault(t *testing.T) {
	median := func(d []time.Duration) time.Duration {
		if len(d) == 0 {
			return 0
		}
		slices.Sort(d)
		return d[len(d)/2]
	}
	synctest.Test(t, func(t *testing.T) {
		served, refused := queueRun(t)
		m := median(served)
		t.Logf("default: %d served, %d refused, median %v", len(served), refused, m)
		if m > 3*time.Second || len(served) < 25 {
			t.Errorf("default: median %v over %d served calls; want bounded queueing (median ≤ 3 s, ≥ 25 served)", m, len(served))
		}
	})
	synctest.Test(t, func(t *testing.T) {
		served, refused := queueRun(t, llmclient.WithQueueTarget(0))
		m := median(served)
		t.Logf("WithQueueTarget(0): %d served, %d refused, median %v", len(served), refused, m)
		if m < 5*time.Second {
			t.Errorf("WithQueueTarget(0): median %v; want first come first served, waiting most of the 10 s deadline", m)
		}
	})
}

// TestAuditHugeRequestLocksNoBucketForLong: "one request … costs a bucket at most its
// burst plus a minute of refill: no input switches the limiter off or locks a key for
// longer than about a minute", for the newer buckets too: a key's OTPM, a quota scope's
// TPM and OTPM, a partition's TPM. After a request with MaxTokens MaxInt, a small request
// without a deadline is admitted within 70 s.
func TestAuditHugeRequestLocksNoBucketForLong(t *testing.T) {
	for name, opts := range map[string][]llmclient.Option{
		"key OTPM": {llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Reply("ok").Forever()),
			Limits: llmclient.Limits{OTPM: 60_000}})},
		"scope TPM and OTPM": {llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Reply("ok").Forever()),
			QuotaScopes: []string{"s"}}), llmclient.WithQuotaScope(llmclient.QuotaScope{Name: "s", Limits: llmclient.Limits{TPM: 60_000, OTPM: 60_000}})},
		"partition TPM": {up("a", fake.New(fake.Reply("ok").Forever())),
			llmclient.WithPartitionLimits("tenant", llmclient.Limits{TPM: 60_000})},
	} {
		synctest.Test(t, func(t *testing.T) {
			c := newClient(t, opts...)
			huge := chatReq("m")
			huge.MaxTokens = math.MaxInt
			huge.Metadata = map[string]string{"tenant": "t"}
			if _, err := c.Complete(context.Background(), huge); err != nil {
				t.Fatalf("%s: the huge request on a full bucket: %v", name, err)
			}
			small := chatReq("m")
			small.MaxTokens = 10
			small.Metadata = map[string]string{"tenant": "t"}
			var err error
			d := elapsed(func() { _, err = c.Complete(withOpts(context.Background(), llmclient.CallOptions{}), small) })
			if err != nil || d > 70*time.Second {
				t.Errorf("%s: the next small request: err %v after %v, want admitted within 70s", name, err, d)
			}
		})
	}
}
