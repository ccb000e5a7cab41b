package llmclient_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/ratelimit"
)

// Every overflow input, through the Client: a request whose MaxTokens is huge,
// a usage report of huge size, headers at the limits of int64. None may switch the limiter
// off (admit everything at once, or report a negative wait), lock the key for hours, or
// turn a cost into 0. The key allows 60k TPM with a 10k bucket: 1000 tokens a second.

// overflowClient returns a Client with one upstream of the given limits served by p.
func overflowClient(t *testing.T, p llmclient.Provider, l llmclient.Limits, opts ...llmclient.Option) *llmclient.Client {
	t.Helper()
	return newClient(t, append(opts, llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: p, Limits: l}))...)
}

var overflowLimits = llmclient.Limits{TPM: 60_000, TokenBurst: 10_000}

// smallReq is a request of about 12 tokens of prompt and 100 of output.
func smallReq() *llmclient.Request {
	r := chatReq("m")
	r.MaxTokens = 100
	return r
}

// TestLimiterHugeMaxTokens: fifty requests asking for 1e13 (or MaxInt) output tokens.
// Each costs at most the bucket plus a minute of refill: the first is admitted when the
// bucket is full, every other one waits a minute more than the one before, so with a
// two-minute deadline at most three are admitted and the rest are refused at once. No
// wait is negative; the cost saturates at 2^40, never at 0.
func TestLimiterHugeMaxTokens(t *testing.T) {
	for _, tc := range []struct {
		name string
		max  int
	}{{"1e13", 1e13}, {"MaxInt", math.MaxInt}, {"MaxInt-1", math.MaxInt - 1}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := overflowClient(t, fake.New(fake.Reply("ok").Usage(12, 3).Forever()), overflowLimits)
				start := time.Now()
				var mu sync.Mutex
				var admitted, refusedLate int
				var wg sync.WaitGroup
				for range 50 {
					wg.Go(func() {
						req := chatReq("m")
						req.MaxTokens = tc.max
						ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
						defer cancel()
						began := time.Now()
						resp, err := c.Complete(ctx, req)
						mu.Lock()
						defer mu.Unlock()
						if err != nil {
							if !errors.Is(err, llmclient.ErrRateLimited) {
								t.Errorf("err %v, want a rate-limited refusal", err)
							} else if time.Since(began) != 0 {
								refusedLate++
							}
							return
						}
						admitted++
						a := resp.Attempts[0]
						if a.Waited < 0 || a.Waited > 2*time.Minute {
							t.Errorf("Waited %v", a.Waited)
						}
						if a.EstimatedTokens != 1<<40 || a.ChargedTokens != 1<<40 {
							t.Errorf("estimated %d, charged %d; want both saturated at 2^40", a.EstimatedTokens, a.ChargedTokens)
						}
					})
				}
				wg.Wait()
				if admitted == 0 || admitted > 3 || refusedLate > 0 {
					t.Fatalf("%d of 50 admitted within two minutes (want 1 to 3: a minute of debt each), %d refused after waiting",
						admitted, refusedLate)
				}
				// The limiter still limits, and no key is locked for hours: a small request
				// after the last admission waits at most the minute of debt.
				began := time.Now()
				if _, err := c.Complete(context.Background(), smallReq()); err != nil {
					t.Fatal(err)
				}
				if w := time.Since(began); w > time.Minute+time.Second {
					t.Fatalf("a small request waited %v after %v", w, began.Sub(start))
				}
			})
		})
	}
}

// TestLimiterHugeUsageReport: a response that reports 1e9, 1e13 or MaxInt tokens of usage
// (whatever the metering) charges the bucket at most a minute of debt: the next small
// request waits at most a minute, not 277 hours, and the limiter still limits after.
func TestLimiterHugeUsageReport(t *testing.T) {
	for _, metering := range []ratelimit.Metering{ratelimit.MeterAdmission, ratelimit.MeterUsage} {
		for _, tc := range []struct {
			name string
			in   int
		}{{"1e9", 1e9}, {"1e13", 1e13}, {"MaxInt", math.MaxInt}} {
			t.Run(tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					// After the huge report, each request reports 200 tokens of usage, more
					// than it is charged (112), as either metering reconciles.
					p := fake.New(fake.Reply("ok").Usage(tc.in, tc.in), fake.Reply("ok").Usage(100, 100).Forever())
					l := overflowLimits
					l.Metering = metering
					c := overflowClient(t, p, l)
					if _, err := c.Complete(context.Background(), smallReq()); err != nil {
						t.Fatal(err)
					}
					began := time.Now()
					if _, err := c.Complete(context.Background(), smallReq()); err != nil {
						t.Fatal(err)
					}
					w := time.Since(began)
					if w > time.Minute+time.Second {
						t.Fatalf("after a usage report of %d, the next request waited %v", tc.in, w)
					}
					// Still limiting: 200 requests of 200 tokens cannot all go at once through
					// a 10k bucket that refills 1000 a second.
					began = time.Now()
					for range 200 {
						if _, err := c.Complete(context.Background(), smallReq()); err != nil {
							t.Fatal(err)
						}
					}
					if time.Since(began) < 25*time.Second {
						t.Fatalf("200 requests of 200 tokens went in %v: the limiter is off", time.Since(began))
					}
				})
			})
		}
	}
}

// TestLimiterExtremeHeaders: rate-limit reports at the edges of int64 (a limit, a
// remaining count and a reset of MaxInt64; negative counts from a custom adapter) neither
// panic nor switch the limiter off.
func TestLimiterExtremeHeaders(t *testing.T) {
	for _, tc := range []struct {
		name string
		rl   ratelimit.Status
	}{
		{"max", ratelimit.Status{
			Requests: ratelimit.Window{Known: true, Limit: math.MaxInt64, Remaining: math.MaxInt64, Reset: math.MaxInt64},
			Tokens:   ratelimit.Window{Known: true, Limit: math.MaxInt64, Remaining: math.MaxInt64, Reset: math.MaxInt64}}},
		{"negative", ratelimit.Status{
			Requests: ratelimit.Window{Known: true, Limit: -5, Remaining: -1, Reset: -time.Hour},
			Tokens:   ratelimit.Window{Known: true, Limit: 60_000, Remaining: -10, Reset: -1}}},
		{"remaining above limit", ratelimit.Status{
			Tokens: ratelimit.Window{Known: true, Limit: 60_000, Remaining: math.MaxInt64, Reset: time.Second}}},
		{"a day's window", ratelimit.Status{
			Tokens: ratelimit.Window{Known: true, Limit: 1, Remaining: 0, Reset: math.MaxInt64}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// No time budget: the calls wait as long as the headers say (a day's window).
				c := overflowClient(t, fake.New(fake.Reply("ok").Usage(12, 3).RateLimits(tc.rl).Forever()), overflowLimits,
					llmclient.WithCallBudget(0))
				began := time.Now()
				for range 200 {
					resp, err := c.Complete(context.Background(), smallReq())
					if err != nil {
						t.Fatal(err)
					}
					if a := resp.Attempts[0]; a.Waited < 0 || a.ChargedTokens <= 0 {
						t.Fatalf("Waited %v, charged %d", a.Waited, a.ChargedTokens)
					}
				}
				if time.Since(began) < 5*time.Second {
					t.Fatalf("200 requests of 112 tokens went in %v through a 10k bucket: the limiter is off", time.Since(began))
				}
			})
		})
	}
}

// TestLimiterExtremeLimits: limits at MaxInt, and a reserved output of MaxInt, are valid and
// neither overflow nor panic; negative daily limits are refused by New.
func TestLimiterExtremeLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		huge := llmclient.Limits{RPM: math.MaxInt, TPM: math.MaxInt, RPD: math.MaxInt, TPD: math.MaxInt, MaxConcurrent: math.MaxInt}
		c := overflowClient(t, fake.New(fake.Reply("ok").Usage(12, 3).Forever()), huge, llmclient.WithReservedOutput(math.MaxInt))
		for range 100 {
			resp, err := c.Complete(context.Background(), chatReq("m"))
			if err != nil {
				t.Fatal(err)
			}
			if a := resp.Attempts[0]; a.Waited != 0 || a.EstimatedTokens != 1<<40 {
				t.Fatalf("Waited %v, estimated %d: want no wait under limits of MaxInt, a cost saturated at 2^40", a.Waited, a.EstimatedTokens)
			}
		}
	})
	for _, l := range []llmclient.Limits{{RPD: -1}, {TPD: math.MinInt}} {
		if _, err := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: fake.New(), Limits: l})); err == nil {
			t.Errorf("New accepted %+v", l)
		}
	}
}
