package redisstore_test

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/ratelimit"
	"github.com/llmclient/llmclient/redisstore"
)

// clampSpec is a key of 100 RPM and 100k TPM with ten-second buckets, as a Client
// derives it with the default burst fraction (1/6).
var clampSpec = limitstore.Spec{
	Requests:      limitstore.Rate{PerSecond: 100.0 / 60, Burst: 100.0 / 6},
	Tokens:        limitstore.Rate{PerSecond: 100_000.0 / 60, Burst: 100_000.0 / 6},
	MaxConcurrent: 4,
	BatchShare:    0.8,
}

// maxDebt is the longest debt a single charge may leave behind on clampSpec's token
// bucket: a charge is at most the burst plus a minute of the rate, so a full bucket is
// left a minute in debt. The next request also waits for its own tokens.
const maxDebt = redisstore.MaxCharge

// huge are the caller-supplied amounts that used to fail the scripts (above 2^53 once
// multiplied by an interval, or turned into an expiry Redis rejects) or to lock a key
// for centuries, and 1e9 (a usage report of 1e9 used to lock a key for 277 hours).
var huge = []int{1e9, 1e13, 1e17, math.MaxInt64}

// TestHugeAmountsThroughStore: reservations, adjustments, syncs and pauses with huge,
// negative and extreme amounts never fail a script, never mark Redis down (the store is
// FailClosed, so a failure would be an error), and never lock the scope for longer than
// the documented clamps: a charge takes at most MaxCharge of the bucket's rate, a pause
// lasts at most MaxPause, and the keys expire once those have passed.
func TestHugeAmountsThroughStore(t *testing.T) {
	srv := startRedis(t)
	s := srv.store(redisstore.WithFailMode(redisstore.FailClosed))
	rdb := srv.client()
	scope := 0
	open := func(t *testing.T) (string, limitstore.State) {
		scope++
		name := "clamp-" + strconv.Itoa(scope)
		return name, s.Open(name, clampSpec)
	}
	must := func(t *testing.T, what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !s.Healthy() {
			t.Fatalf("%s: the store marked Redis down", what)
		}
	}
	// debtAfter reports the wait of a one-token request (main lane) after the step.
	debtAfter := func(t *testing.T, st limitstore.State) time.Duration {
		t.Helper()
		w, ok, err := reserveWait(st, ctx(t), limitstore.Reservation{Tokens: 1, MaxWait: 0})
		must(t, "probe reservation", err)
		if ok {
			if err := st.Adjust(ctx(t), limitstore.LaneMain, 0, -1); err != nil {
				t.Fatal(err)
			}
		}
		return w
	}
	checkTTL := func(t *testing.T, name string) {
		t.Helper()
		ttl, err := rdb.PTTL(ctx(t), "{llmclient:"+name+"}:g").Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl > redisstore.MaxPause+redisstore.MaxCharge+time.Hour+time.Second {
			t.Fatalf("the bucket hash expires in %v, beyond an hour after the clamped pause and debt", ttl)
		}
	}

	for _, n := range huge {
		for _, lane := range []limitstore.Lane{limitstore.LaneMain, limitstore.LaneBatch} {
			t.Run(fmt.Sprintf("reserve %d tokens lane %d", n, lane), func(t *testing.T) {
				name, st := open(t)
				before := time.Now()
				w, ok, err := reserveWait(st, ctx(t), limitstore.Reservation{Lane: lane, Requests: 1, Tokens: n, MaxWait: -1})
				must(t, "reserve", err)
				if !ok || w != 0 {
					t.Fatalf("a request larger than the bucket is admitted at once when the bucket is full; got %v, %v", w, ok)
				}
				if lane == limitstore.LaneMain {
					// The debt shrinks while the test runs; the probe's one token takes 0.6ms.
					if d := debtAfter(t, st); d < maxDebt-time.Since(before) || d > maxDebt+time.Millisecond {
						t.Fatalf("the next request waits %v; want the debt %v (MaxCharge of refill beyond empty)", d, maxDebt)
					}
				}
				// Giving the whole amount back (a canceled attempt) leaves the bucket full.
				must(t, "give back", st.Adjust(ctx(t), lane, -1, -n))
				if w, ok, err := reserveWait(st, ctx(t), limitstore.Reservation{Lane: lane, Tokens: 10_000, MaxWait: 0}); err != nil || !ok {
					t.Fatalf("after the give-back: %v, %v, %v; want the bucket full", w, ok, err)
				}
				checkTTL(t, name)
			})
			t.Run(fmt.Sprintf("usage overrun of %d tokens lane %d", n, lane), func(t *testing.T) {
				name, st := open(t)
				must(t, "adjust", st.Adjust(ctx(t), lane, n, n))
				if lane == limitstore.LaneMain {
					if d := debtAfter(t, st); d <= 0 || d > redisstore.MaxCharge+time.Millisecond {
						t.Fatalf("the next request waits %v; want at most MaxCharge %v (and its own token)", d, redisstore.MaxCharge)
					}
				}
				checkTTL(t, name)
			})
		}
		t.Run(fmt.Sprintf("report of %d remaining", n), func(t *testing.T) {
			_, st := open(t)
			_, err := report(st, ctx(t), float64(n))
			must(t, "sync", err)
			if d := debtAfter(t, st); d != 0 {
				t.Fatalf("a report of more than the bucket lowered it: the next request waits %v", d)
			}
		})
	}
	for _, n := range []int{-1e17, math.MinInt64} {
		t.Run(fmt.Sprintf("negative amounts %d", n), func(t *testing.T) {
			_, st := open(t)
			w, ok, err := reserveWait(st, ctx(t), limitstore.Reservation{Requests: n, Tokens: n, MaxWait: 0})
			must(t, "reserve", err)
			if !ok || w != 0 {
				t.Fatalf("a negative reservation takes nothing and is admitted; got %v, %v", w, ok)
			}
			must(t, "adjust", st.Adjust(ctx(t), limitstore.LaneMain, n, n))
			if d := debtAfter(t, st); d != 0 {
				t.Fatalf("negative amounts changed the bucket: the next request waits %v", d)
			}
			// A report of a huge debt at the upstream lowers the bucket by at most a
			// minute of refill beyond empty.
			_, err = report(st, ctx(t), float64(n))
			must(t, "sync", err)
			if d := debtAfter(t, st); d <= 0 || d > redisstore.MaxCharge+time.Millisecond {
				t.Fatalf("after a report of %d remaining the next request waits %v; want at most MaxCharge %v", n, d, redisstore.MaxCharge)
			}
		})
	}
	t.Run("max wait", func(t *testing.T) {
		_, st := open(t)
		must(t, "adjust", st.Adjust(ctx(t), limitstore.LaneMain, 0, math.MaxInt64))
		w, ok, err := reserveWait(st, ctx(t), limitstore.Reservation{Tokens: 1, MaxWait: math.MaxInt64})
		must(t, "reserve", err)
		if !ok || w <= 0 || w > redisstore.MaxCharge+time.Millisecond {
			t.Fatalf("Reserve with MaxWait MaxInt64: %v, %v; want admitted after the debt", w, ok)
		}
	})
	for _, d := range []time.Duration{redisstore.MaxPause + time.Nanosecond, 1e17, math.MaxInt64} {
		t.Run(fmt.Sprintf("pause %d", d), func(t *testing.T) {
			name, st := open(t)
			before := time.Now()
			must(t, "pause", st.Pause(ctx(t), d))
			left, err := pausedFor(st, ctx(t))
			must(t, "pause left", err)
			if left < redisstore.MaxPause-time.Since(before) || left > redisstore.MaxPause {
				t.Fatalf("PauseLeft %v after a pause of %v; want the pause clamped to MaxPause %v", left, d, redisstore.MaxPause)
			}
			w, ok, err := reserveWait(st, ctx(t), limitstore.Reservation{Requests: 1, MaxWait: -1})
			must(t, "reserve", err)
			if !ok || w > redisstore.MaxPause {
				t.Fatalf("a request during the pause: %v, %v; want admitted once the clamped pause ends", w, ok)
			}
			checkTTL(t, name)
		})
	}
	for _, d := range []time.Duration{-1, math.MinInt64} {
		t.Run(fmt.Sprintf("pause %d", d), func(t *testing.T) {
			_, st := open(t)
			must(t, "pause", st.Pause(ctx(t), d))
			if left, err := pausedFor(st, ctx(t)); err != nil || left != 0 {
				t.Fatalf("a negative pause left %v, %v", left, err)
			}
		})
	}
	t.Run("queue beyond the horizon", func(t *testing.T) {
		// A bucket of one request a day: the second request waits a day, the third would wait
		// two and is refused, even though it accepts any wait.
		st := s.Open("horizon", limitstore.Spec{Requests: limitstore.Rate{PerSecond: 1.0 / 86400, Burst: 1}})
		for i, want := range []bool{true, true, false} {
			w, ok, err := reserveWait(st, ctx(t), limitstore.Reservation{Requests: 1, MaxWait: -1})
			must(t, "reserve", err)
			if ok != want || w > redisstore.WaitHorizon {
				t.Fatalf("request %d: %v, %v; want admitted %v and no wait beyond WaitHorizon", i, w, ok, want)
			}
		}
	})
}

// TestUnusableSpecs: rates and bursts that are NaN, infinite, negative, tiny or huge
// (which a caller of Open can pass; a Client never does) never fail a script: a rate that
// is not positive and finite limits nothing, a rate below one unit per WaitHorizon is one
// unit per WaitHorizon, and a burst holds at most WaitHorizon of its rate.
func TestUnusableSpecs(t *testing.T) {
	srv := startRedis(t)
	s := srv.store(redisstore.WithFailMode(redisstore.FailClosed))
	nan, inf := math.NaN(), math.Inf(1)
	rates := []limitstore.Rate{
		{PerSecond: nan, Burst: 10}, {PerSecond: inf, Burst: 10}, {PerSecond: -1, Burst: 10},
		{PerSecond: 10, Burst: nan}, {PerSecond: 10, Burst: -5}, {PerSecond: 10, Burst: inf}, {PerSecond: 10, Burst: 1e300},
		{PerSecond: 1e-300, Burst: 1}, {PerSecond: 1e300, Burst: 1e300}, {PerSecond: math.SmallestNonzeroFloat64, Burst: math.MaxFloat64},
	}
	for i, r := range rates {
		for _, share := range []float64{1, 0.5, 1e-300, nan, -1} {
			t.Run(fmt.Sprintf("%v/%v", r, share), func(t *testing.T) {
				spec := limitstore.Spec{Requests: r, Tokens: r, DailyRequests: r, DailyTokens: r, BatchShare: share}
				st := s.Open("spec-"+strconv.Itoa(i)+"-"+strconv.FormatFloat(share, 'g', -1, 64), spec)
				// Retune to the spec, from limits and back.
				if err := st.Retune(ctx(t), clampSpec); err != nil {
					t.Fatalf("Retune: %v", err)
				}
				if err := st.Retune(ctx(t), spec); err != nil {
					t.Fatalf("Retune: %v", err)
				}
				for _, lane := range []limitstore.Lane{limitstore.LaneMain, limitstore.LaneBatch} {
					for _, n := range []int{1, 1e17} {
						w, _, err := reserveWait(st, ctx(t), limitstore.Reservation{Lane: lane, Requests: 1, Tokens: n, MaxWait: 0})
						if err != nil || w < 0 || w > redisstore.WaitHorizon {
							t.Fatalf("Reserve %d: %v, %v", n, w, err)
						}
						if err := st.Adjust(ctx(t), lane, n, n); err != nil {
							t.Fatalf("Adjust: %v", err)
						}
					}
				}
				if _, err := report(st, ctx(t), 0); err != nil {
					t.Fatalf("Sync: %v", err)
				}
				if !s.Healthy() {
					t.Fatal("the store marked Redis down")
				}
			})
		}
	}
}

// TestUnusableReports: reports whose counts are NaN, infinite, huge or negative, and
// gains outside (0, 1], never fail the sync script nor mark Redis down; NaN and infinite
// counts are unknown and change nothing, and no report lowers a bucket by more than a
// minute of refill beyond empty.
func TestUnusableReports(t *testing.T) {
	srv := startRedis(t)
	s := srv.store(redisstore.WithFailMode(redisstore.FailClosed))
	nan, inf := math.NaN(), math.Inf(1)
	values := []float64{nan, inf, -inf, 1e9, 1e13, 1e17, math.MaxInt64, -1e17, math.MinInt64, math.MaxFloat64, -math.MaxFloat64, 0}
	for i, x := range values {
		for _, gain := range []float64{1, nan, inf, -1, 1e-300} {
			st := s.Open("report-"+strconv.Itoa(i)+"-"+strconv.FormatFloat(gain, 'g', -1, 64), clampSpec)
			g, err := st.Reserve(ctx(t), limitstore.Reservation{Requests: 1, Tokens: 1000, MaxWait: -1})
			if err != nil || !g.OK {
				t.Fatalf("Reserve: %+v, %v", g, err)
			}
			lv := limitstore.Levels{Requests: x, Tokens: x, DailyRequests: x, DailyTokens: x}
			tot := limitstore.Totals{Tokens: x, Estimate: x, Requests: x}
			c, err := st.Sync(ctx(t), limitstore.Report{Mark: g.Mark, Predicted: g.Levels, Target: lv, Reserve: lv,
				Totals: tot, Gain: gain})
			if err != nil || !s.Healthy() {
				t.Fatalf("report of %v, gain %v: %v (healthy %v)", x, gain, err, s.Healthy())
			}
			for _, m := range []float64{c.Made.Requests, c.Made.Tokens} {
				if math.IsInf(m, 0) || (math.IsNaN(x) || math.IsInf(x, 0)) && !math.IsNaN(m) {
					t.Fatalf("report of %v, gain %v: made %+v", x, gain, c.Made)
				}
			}
			if f := c.Fit; math.IsNaN(f.Counted) || math.IsInf(f.Counted, 0) || math.IsNaN(f.Noise) {
				t.Fatalf("report of %v: fit %+v", x, f)
			}
			w, _, err := reserveWait(st, ctx(t), limitstore.Reservation{Tokens: 1, MaxWait: 0})
			if err != nil || w > redisstore.MaxCharge+time.Second {
				t.Fatalf("report of %v, gain %v: the next request waits %v, %v; want at most MaxCharge", x, gain, w, err)
			}
		}
	}
}

// TestHugeSlotBounds: MaxConcurrent near MaxInt is as good as no bound, and batch
// requests keep their share of it: the share used to overflow to a single batch slot.
func TestHugeSlotBounds(t *testing.T) {
	srv := startRedis(t)
	s := srv.store(redisstore.WithFailMode(redisstore.FailClosed))
	for _, share := range []float64{1, 0.5} {
		st := s.Open("slots-"+strconv.FormatFloat(share, 'g', -1, 64), limitstore.Spec{MaxConcurrent: math.MaxInt, BatchShare: share})
		var leases []limitstore.SlotLease
		for i := range 3 {
			l, _, err := st.AcquireSlot(ctx(t), true, 0)
			if err != nil {
				t.Fatalf("share %v: batch slot %d: %v", share, i, err)
			}
			leases = append(leases, l)
		}
		for _, l := range leases {
			st.ReleaseSlot(l)
		}
	}
}

// amounts is a Provider that reports the usage and remaining quota it is given, or
// answers 429 with the given Retry-After.
type amounts struct {
	usage      llmclient.Usage
	remaining  *ratelimit.Status
	retryAfter time.Duration // > 0: answer 429
}

func (p *amounts) Complete(context.Context, *llmclient.Call) (*llmclient.Response, error) {
	if p.retryAfter > 0 {
		return nil, &llmclient.Error{Class: failure.RateLimited, Status: 429, RetryAfter: p.retryAfter}
	}
	return &llmclient.Response{Text: "ok", FinishReason: finish.Stop, Usage: p.usage, RateLimits: p.remaining}, nil
}

func (p *amounts) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, llmclient.ErrUnsupported
}

// TestHugeAmountsThroughClient: a request's MaxTokens, a response's usage, its
// remaining-quota headers and a 429's Retry-After, at 1e13, 1e17 and MaxInt64 (and
// negative headers), never switch the shared limiter off: the store stays on Redis, a
// second key keeps being admitted, and the key itself is locked for at most MaxCharge
// (a request or usage report) or MaxPause (a 429). The store is FailClosed, so a store
// that marked Redis down would refuse every key.
func TestHugeAmountsThroughClient(t *testing.T) {
	srv := startRedis(t)
	s := srv.store(redisstore.WithFailMode(redisstore.FailClosed))
	limits := llmclient.Limits{RPM: 100, TPM: 100_000, Metering: ratelimit.MeterUsage}
	n := 0
	// newClient returns a fail-fast Client on a fresh key of p, and another Client on a
	// second key, both through the store.
	newClient := func(t *testing.T, p llmclient.Provider) (c, other *llmclient.Client) {
		n++
		for i, cp := range []**llmclient.Client{&c, &other} {
			var prov llmclient.Provider = p
			if i == 1 {
				prov = &amounts{}
			}
			cl, err := llmclient.New(
				llmclient.WithUpstream(llmclient.Upstream{Name: fmt.Sprintf("vendor%d-%d", n, i), Provider: prov,
					Keys: []string{"sk-clamp"}, Limits: limits}),
				llmclient.WithLimitStore(s),
				llmclient.WithLimiterMode(ratelimit.FailFast),
				llmclient.WithDecision(failure.RateLimited, llmclient.Decision{Cooldown: true}),
			)
			if err != nil {
				t.Fatal(err)
			}
			*cp = cl
		}
		return c, other
	}
	// lockedFor sends a small request: it returns 0 when admitted, else the wait the
	// limiter refused.
	lockedFor := func(t *testing.T, c *llmclient.Client) time.Duration {
		t.Helper()
		_, err := c.Complete(ctx(t), hello())
		if err == nil {
			return 0
		}
		e, ok := err.(*llmclient.Error)
		if !ok || e.Class != failure.RateLimited || e.Status != 0 {
			t.Fatalf("small request: %v; want admitted or refused by the limiter", err)
		}
		return e.AdmitAfter
	}
	stillShared := func(t *testing.T, other *llmclient.Client) {
		t.Helper()
		if !s.Healthy() {
			t.Fatal("the store marked Redis down")
		}
		if _, err := other.Complete(ctx(t), hello()); err != nil {
			t.Fatalf("another key: %v", err)
		}
	}
	for _, v := range huge {
		t.Run(fmt.Sprintf("max tokens %d", v), func(t *testing.T) {
			c, other := newClient(t, &amounts{})
			req := hello()
			req.MaxTokens = v
			if _, err := c.Complete(ctx(t), req); err != nil {
				t.Fatalf("a request larger than the bucket is admitted when the bucket is full: %v", err)
			}
			stillShared(t, other)
			// The small request waits for the debt and its own ~1k tokens (0.6s).
			if d := lockedFor(t, c); d <= 0 || d > maxDebt+time.Second {
				t.Fatalf("the key is locked for %v after one request; want a debt of at most %v", d, maxDebt)
			}
		})
		t.Run(fmt.Sprintf("usage %d", v), func(t *testing.T) {
			c, other := newClient(t, &amounts{usage: llmclient.Usage{InputTokens: v / 2, OutputTokens: v / 2}})
			if _, err := c.Complete(ctx(t), hello()); err != nil {
				t.Fatal(err)
			}
			stillShared(t, other)
			d := lockedFor(t, c)
			if v > 1<<30 {
				// A report above 2^30 tokens is no report (the Client's estimate stands):
				// it charges nothing.
				if d != 0 {
					t.Fatalf("the key is locked for %v after an implausible usage report; want it ignored", d)
				}
				return
			}
			// The small request waits for the debt and its own ~1k tokens (0.6s).
			if d <= 0 || d > redisstore.MaxCharge+time.Second {
				t.Fatalf("the key is locked for %v after one usage report; want a debt of at most MaxCharge %v", d, redisstore.MaxCharge)
			}
		})
		t.Run(fmt.Sprintf("remaining %d", v), func(t *testing.T) {
			w := ratelimit.Window{Known: true, Limit: int64(v), Remaining: int64(v)}
			c, other := newClient(t, &amounts{remaining: &ratelimit.Status{Requests: w, Tokens: w}})
			for range 2 {
				if _, err := c.Complete(ctx(t), hello()); err != nil {
					t.Fatal(err)
				}
			}
			stillShared(t, other)
		})
		t.Run(fmt.Sprintf("retry after %d", v), func(t *testing.T) {
			if time.Duration(v) <= redisstore.MaxPause {
				t.Skip("a Retry-After within MaxPause is not clamped")
			}
			p := &amounts{retryAfter: time.Duration(v)}
			c, other := newClient(t, p)
			if _, err := c.Complete(ctx(t), hello()); llmclient.ClassOf(err) != failure.RateLimited {
				t.Fatalf("want the upstream's 429, got %v", err)
			}
			stillShared(t, other)
			// A second replica on the same key sees the pause, clamped.
			p.retryAfter = 0
			replica, err := llmclient.New(
				llmclient.WithUpstream(llmclient.Upstream{Name: fmt.Sprintf("vendor%d-0", n), Provider: p,
					Keys: []string{"sk-clamp"}, Limits: limits}),
				llmclient.WithLimitStore(s), llmclient.WithLimiterMode(ratelimit.FailFast))
			if err != nil {
				t.Fatal(err)
			}
			if d := lockedFor(t, replica); d <= 0 || d > redisstore.MaxPause {
				t.Fatalf("the key is paused for %v in the store; want at most MaxPause %v", d, redisstore.MaxPause)
			}
		})
	}
	t.Run("negative usage", func(t *testing.T) {
		c, other := newClient(t, &amounts{usage: llmclient.Usage{InputTokens: -1e17, OutputTokens: math.MinInt64 / 2,
			TotalTokens: math.MinInt64}})
		for range 3 {
			if _, err := c.Complete(ctx(t), hello()); err != nil {
				t.Fatal(err)
			}
		}
		stillShared(t, other)
		if d := lockedFor(t, c); d != 0 {
			t.Fatalf("negative usage reports lock the key for %v; want them to give back at most what was charged", d)
		}
	})
	t.Run("negative remaining", func(t *testing.T) {
		w := ratelimit.Window{Known: true, Limit: math.MinInt64, Remaining: math.MinInt64}
		c, other := newClient(t, &amounts{remaining: &ratelimit.Status{Requests: w, Tokens: w}})
		if _, err := c.Complete(ctx(t), hello()); err != nil {
			t.Fatal(err)
		}
		stillShared(t, other)
		if d := lockedFor(t, c); d != 0 {
			t.Fatalf("a negative remaining count is unknown and changes nothing; the key waits %v", d)
		}
	})
}
