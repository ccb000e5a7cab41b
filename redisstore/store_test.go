package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/redisstore"
	"github.com/redis/go-redis/v9"
)

func TestNewValidates(t *testing.T) {
	good := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer good.Close()
	noCtx := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer noCtx.Close()
	cases := []struct {
		name string
		rdb  redis.Scripter
		opts []redisstore.Option
		want string // a part of the error; "" for none
	}{
		{"defaults", good, nil, ""},
		{"all options", good, []redisstore.Option{
			redisstore.WithPrefix("app"), redisstore.WithTimeout(20 * time.Millisecond),
			redisstore.WithFailMode(redisstore.FailClosed), redisstore.WithProbeInterval(time.Second),
			redisstore.WithLeaseTTL(time.Second), redisstore.WithLocalShare(0.25)}, ""},
		{"nil client", nil, nil, "nil Redis client"},
		{"no context timeouts", noCtx, nil, "ContextTimeoutEnabled"},
		{"empty prefix", good, []redisstore.Option{redisstore.WithPrefix("")}, "prefix"},
		{"brace in prefix", good, []redisstore.Option{redisstore.WithPrefix("a{b")}, "prefix"},
		{"zero timeout", good, []redisstore.Option{redisstore.WithTimeout(0)}, "timeout"},
		{"unknown mode", good, []redisstore.Option{redisstore.WithFailMode(7)}, "fail mode"},
		{"zero probe interval", good, []redisstore.Option{redisstore.WithProbeInterval(0)}, "probe interval"},
		{"lease below three timeouts", good, []redisstore.Option{redisstore.WithLeaseTTL(250 * time.Millisecond)}, "lease TTL"},
		{"zero share", good, []redisstore.Option{redisstore.WithLocalShare(0)}, "local share"},
		{"share above one", good, []redisstore.Option{redisstore.WithLocalShare(1.5)}, "local share"},
		{"NaN share", good, []redisstore.Option{redisstore.WithLocalShare(math.NaN())}, "local share"},
		{"infinite share", good, []redisstore.Option{redisstore.WithLocalShare(math.Inf(1))}, "local share"},
		{"negative timeout", good, []redisstore.Option{redisstore.WithTimeout(-time.Second)}, "timeout"},
		{"huge timeout", good, []redisstore.Option{redisstore.WithTimeout(math.MaxInt64), redisstore.WithLeaseTTL(time.Hour)}, "timeout"},
		{"a timeout of a minute", good, []redisstore.Option{redisstore.WithTimeout(time.Minute), redisstore.WithLeaseTTL(time.Hour)}, ""},
		{"negative probe interval", good, []redisstore.Option{redisstore.WithProbeInterval(-1)}, "probe interval"},
		// A probe interval that overflowed time.Now().Add(d).UnixNano() made the store probe
		// a dead Redis on every call, the opposite of what it asks for.
		{"huge probe interval", good, []redisstore.Option{redisstore.WithProbeInterval(math.MaxInt64)}, "probe interval"},
		{"a probe interval of an hour", good, []redisstore.Option{redisstore.WithProbeInterval(time.Hour)}, ""},
		{"negative lease TTL", good, []redisstore.Option{redisstore.WithLeaseTTL(math.MinInt64)}, "lease TTL"},
		{"huge lease TTL", good, []redisstore.Option{redisstore.WithLeaseTTL(math.MaxInt64)}, "lease TTL"},
		{"huge timeout and lease TTL", good, []redisstore.Option{redisstore.WithTimeout(math.MaxInt64 / 3),
			redisstore.WithLeaseTTL(math.MaxInt64)}, "timeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := redisstore.New(c.rdb, c.opts...)
			if s != nil {
				defer s.Close()
			}
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("New: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("New: %v, want an error about %q", err, c.want)
			case err != nil && !strings.HasPrefix(err.Error(), "redisstore: "):
				t.Fatalf("error %q does not start with the package name", err)
			}
		})
	}
}

// bucketSpec is the limits TestBucketsMatchMemory compares the stores on, with its rates
// divided by k: its waits are k times longer.
func bucketSpec(k float64) limitstore.Spec {
	return limitstore.Spec{
		Requests:   limitstore.Rate{PerSecond: 2 / k, Burst: 3},
		Tokens:     limitstore.Rate{PerSecond: 100 / k, Burst: 300},
		BatchShare: 0.5,
	}
}

// dailySpec is bucketSpec with daily buckets (of 10 requests and 1,000 tokens).
func dailySpec(k float64) limitstore.Spec {
	s := bucketSpec(k)
	s.DailyRequests = limitstore.Rate{PerSecond: 1 / k, Burst: 10}
	s.DailyTokens = limitstore.Rate{PerSecond: 50 / k, Burst: 1000}
	return s
}

// halfSpec is dailySpec with half the token burst.
func halfSpec(k float64) limitstore.Spec {
	s := dailySpec(k)
	s.Tokens.Burst = 150
	return s
}

// step is one operation of TestBucketsMatchMemory on one store's state; last is that
// store's latest main-lane grant, for the reports.
type step struct {
	name string
	do   func(ctx context.Context, s limitstore.State, last *limitstore.Grant) (stepResult, error)
}

// stepResult is what a step returned: a wait, an admission, and counts (a grant's levels and
// totals, a correction), which the two stores must agree on.
type stepResult struct {
	wait   time.Duration
	ok     bool
	counts []float64
}

func reserve(lane limitstore.Lane, req, tok int, maxWait time.Duration) func(context.Context, limitstore.State, *limitstore.Grant) (stepResult, error) {
	return func(ctx context.Context, s limitstore.State, last *limitstore.Grant) (stepResult, error) {
		g, err := s.Reserve(ctx, limitstore.Reservation{Lane: lane, Requests: req, Tokens: tok, MaxWait: maxWait})
		if g.OK && lane == limitstore.LaneMain {
			*last = g
		}
		lv, tt := g.Levels, g.Totals
		return stepResult{g.Wait, g.OK, []float64{lv.Requests, lv.Tokens, lv.DailyRequests, lv.DailyTokens,
			tt.Tokens, tt.Estimate, tt.Requests}}, err
	}
}

func adjust(lane limitstore.Lane, req, tok int) func(context.Context, limitstore.State, *limitstore.Grant) (stepResult, error) {
	return func(ctx context.Context, s limitstore.State, _ *limitstore.Grant) (stepResult, error) {
		return stepResult{ok: true}, s.Adjust(ctx, lane, req, tok)
	}
}

// heldSteps returns steps that reserve tokens on the main lane held in flight
// (Reservation.InFlight) with the given vendor burst, and that end the hold of the
// reservation of held tokens (AdjustInFlight with its mark) and adjust the main lane.
func heldSteps() (
	reserveHeld func(tok int, vendorBurst float64) func(context.Context, limitstore.State, *limitstore.Grant) (stepResult, error),
	adjustHeld func(held, req, tok int) func(context.Context, limitstore.State, *limitstore.Grant) (stepResult, error),
) {
	type hold struct {
		s   limitstore.State
		tok int
	}
	marks := map[hold]int64{}
	reserveHeld = func(tok int, vendorBurst float64) func(context.Context, limitstore.State, *limitstore.Grant) (stepResult, error) {
		return func(ctx context.Context, s limitstore.State, last *limitstore.Grant) (stepResult, error) {
			g, err := s.Reserve(ctx, limitstore.Reservation{Requests: 1, Tokens: tok, MaxWait: 0, InFlight: true, VendorBurst: vendorBurst})
			if g.OK {
				*last = g
				marks[hold{s, tok}] = g.Mark
			}
			return stepResult{g.Wait, g.OK, []float64{g.Levels.Requests, g.Levels.Tokens, g.Totals.Tokens}}, err
		}
	}
	adjustHeld = func(held, req, tok int) func(context.Context, limitstore.State, *limitstore.Grant) (stepResult, error) {
		return func(ctx context.Context, s limitstore.State, _ *limitstore.Grant) (stepResult, error) {
			return stepResult{ok: true}, s.(limitstore.InFlightAdjuster).AdjustInFlight(ctx, marks[hold{s, held}], held, req, tok)
		}
	}
	return reserveHeld, adjustHeld
}

// reportOf reports the last grant: the upstream had target left (NaN: unknown), with the
// given reserves and gain.
func reportOf(target, reserve limitstore.Levels, gain float64) func(context.Context, limitstore.State, *limitstore.Grant) (stepResult, error) {
	return func(ctx context.Context, s limitstore.State, last *limitstore.Grant) (stepResult, error) {
		c, err := s.Sync(ctx, limitstore.Report{Mark: last.Mark, Predicted: last.Levels, Target: target,
			Reserve: reserve, Totals: last.Totals, Gain: gain})
		m, cv, p, f := c.Made, c.Covered, c.Pending, c.Fit
		return stepResult{ok: true, counts: []float64{m.Requests, m.Tokens, m.DailyRequests, m.DailyTokens,
			cv.Tokens, cv.Estimate, cv.Requests, p.Tokens, p.Estimate, p.Requests,
			f.Counted, f.Estimated, f.Noise, f.Reports}}, err
	}
}

// tokensLeft is a report of the per-minute token bucket only.
func tokensLeft(n float64) func(context.Context, limitstore.State, *limitstore.Grant) (stepResult, error) {
	lv := limitstore.Unknown
	lv.Tokens = n
	return reportOf(lv, limitstore.Unknown, 1)
}

// counted returns reports of the last grant that say the upstream counted extra tokens
// more than it was charged: the target is the level the grant predicted, less every
// correction the reports made so far on that state, less extra.
func counted() func(extra float64) func(context.Context, limitstore.State, *limitstore.Grant) (stepResult, error) {
	made := map[limitstore.State]float64{}
	return func(extra float64) func(context.Context, limitstore.State, *limitstore.Grant) (stepResult, error) {
		return func(ctx context.Context, s limitstore.State, last *limitstore.Grant) (stepResult, error) {
			lv := limitstore.Unknown
			lv.Tokens = last.Levels.Tokens - made[s] - extra
			r, err := reportOf(lv, limitstore.Unknown, 1)(ctx, s, last)
			if len(r.counts) > 1 && !math.IsNaN(r.counts[1]) {
				made[s] += r.counts[1]
			}
			return r, err
		}
	}
}

func retune(spec limitstore.Spec) func(context.Context, limitstore.State, *limitstore.Grant) (stepResult, error) {
	return func(ctx context.Context, s limitstore.State, _ *limitstore.Grant) (stepResult, error) {
		return stepResult{ok: true}, s.Retune(ctx, spec)
	}
}

func pause(d time.Duration) func(context.Context, limitstore.State, *limitstore.Grant) (stepResult, error) {
	return func(ctx context.Context, s limitstore.State, _ *limitstore.Grant) (stepResult, error) {
		return stepResult{ok: true}, s.Pause(ctx, d)
	}
}

func evict(d time.Duration) func(context.Context, limitstore.State, *limitstore.Grant) (stepResult, error) {
	return func(ctx context.Context, s limitstore.State, _ *limitstore.Grant) (stepResult, error) {
		return stepResult{ok: true}, s.Evict(ctx, d)
	}
}

func blocked(ctx context.Context, s limitstore.State, _ *limitstore.Grant) (stepResult, error) {
	b, err := s.Blocked(ctx)
	return stepResult{wait: b.Paused, ok: true, counts: []float64{b.Evicted.Seconds()}}, err
}

// sameCounts reports whether two stores' counts agree within tol (an absolute slack, for
// what the steps' timing lets a level refill) and a relative 1e-5 (the fit's noise squares
// those differences); NaN equals NaN.
func sameCounts(a, b []float64, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		switch x, y := a[i], b[i]; {
		case math.IsNaN(x) || math.IsNaN(y):
			if math.IsNaN(x) != math.IsNaN(y) {
				return false
			}
		case math.Abs(x-y) > tol+1e-5*max(math.Abs(x), math.Abs(y)):
			return false
		}
	}
	return true
}

// TestBucketsMatchMemory plays the same steps on the in-memory store and on Redis: the
// scripts must make the same decisions and report the same waits. The two stores run
// each step at slightly different moments, which shifts their waits by at most the spread
// of those offsets; the test measures it and allows exactly that (plus a microsecond of
// rounding). The rates are slowed down (by k) so that every decision has seconds to
// minutes of margin: a loaded machine cannot flip one. (The case of a request larger than
// the bucket uses k = 5: at slower rates MaxCharge would cap the charge, which the
// in-memory store does not.)
func TestBucketsMatchMemory(t *testing.T) {
	const main, batch = limitstore.LaneMain, limitstore.LaneBatch
	cases := []struct {
		name  string
		k     float64 // the rates are divided, and the waits multiplied, by k
		steps func(k time.Duration) []step
	}{
		{"requests bucket", 1000, func(k time.Duration) []step {
			return []step{
				{"burst 1", reserve(main, 1, 0, 0)},
				{"burst 2", reserve(main, 1, 0, 0)},
				{"burst 3", reserve(main, 1, 0, 0)},
				{"empty, fail fast", reserve(main, 1, 0, 0)},
				{"empty, too short a wait", reserve(main, 1, 0, 400*time.Millisecond*k)},
				{"empty, waits 0.5s", reserve(main, 1, 0, time.Second*k)},
				{"queued behind it, waits 1s", reserve(main, 1, 0, -1)},
			}
		}},
		{"tokens bucket and debt", 1000, func(k time.Duration) []step {
			return []step{
				{"100 of 300", reserve(main, 1, 100, 0)},
				{"250 needs 0.5s", reserve(main, 1, 250, 0)},
				{"250 within 1s", reserve(main, 1, 250, time.Second*k)},
				{"give it back", adjust(main, -1, -250)},
				{"250 needs 0.5s again", reserve(main, 1, 250, 0)},
				{"charge an overrun of 100", adjust(main, 0, 100)},
				{"10 tokens still fit at once", reserve(main, 0, 10, 0)},
			}
		}},
		{"output held in flight", 1000, func(k time.Duration) []step {
			reserveHeld, adjustHeld := heldSteps()
			return []step{
				{"hold 200 of 300", reserveHeld(200, 0)},
				{"a vendor bucket of 500: hold 50 more", reserveHeld(50, 500)},
				{"the first ends, 20 more than held", adjustHeld(200, 0, 20)},
				{"the second is given back", adjustHeld(50, -1, -50)},
				{"80 left: 100 needs 0.2s", reserve(main, 1, 100, 0)},
				{"100 within 1s", reserve(main, 1, 100, time.Second*k)},
			}
		}},
		{"request larger than the bucket", 5, func(k time.Duration) []step {
			return []step{
				{"1000 tokens when full", reserve(main, 1, 1000, 0)},
				{"debt: the next waits 7s", reserve(main, 1, 1, 0)},
				{"refund caps at the burst", adjust(main, 0, -5000)},
				{"full again", reserve(main, 1, 300, 0)},
			}
		}},
		{"reports correct both ways, never above the store's accounting", 1000, func(k time.Duration) []step {
			return []step{
				{"take 100", reserve(main, 1, 100, 0)},
				{"upstream says 50 tokens left: lowered by 150", tokensLeft(50)},
				{"100 needs 0.5s", reserve(main, 0, 100, 0)},
				{"take 10 at once", reserve(main, 1, 10, 0)},
				{"upstream says 140 left: the 150 lowered come back, less 10", tokensLeft(140)},
				{"a stale report changes nothing", reportOf(limitstore.Levels{Requests: 0, Tokens: 0,
					DailyRequests: math.NaN(), DailyTokens: math.NaN()}, limitstore.Unknown, 1)},
				{"take 20", reserve(main, 1, 20, 0)},
				{"upstream says 3000 left: nothing above the accounting", tokensLeft(3000)},
				{"take 30 after a wait", reserve(main, 1, 30, -1)},
				{"half of a 100 error, reserves of 1 request and 50 tokens", reportOf(limitstore.Levels{
					Requests: math.NaN(), Tokens: 0, DailyRequests: math.NaN(), DailyTokens: math.NaN()},
					limitstore.Levels{Requests: 1, Tokens: 50, DailyRequests: math.NaN(), DailyTokens: math.NaN()}, 0.5)},
				{"the reserves hold", reserve(main, 1, 200, 0)},
				{"take 5", reserve(main, 0, 5, -1)},
				{"upstream says no requests left", reportOf(limitstore.Levels{Requests: 0, Tokens: math.NaN(),
					DailyRequests: math.NaN(), DailyTokens: math.NaN()}, limitstore.Unknown, 0)},
				{"a request waits", reserve(main, 1, 0, -1)},
			}
		}},
		{"the fit", 1000, func(k time.Duration) []step {
			var s []step
			more := counted()
			for i := range 6 {
				s = append(s, step{"take 10", reserve(main, 1, 10, -1)},
					step{fmt.Sprintf("upstream counted %d", 13+i%2), more(float64(3 + i%2))})
			}
			return s
		}},
		{"daily buckets and retune", 1000, func(k time.Duration) []step {
			return []step{
				{"retune to daily buckets", retune(dailySpec(float64(k)))},
				{"take 100", reserve(main, 1, 100, 0)},
				{"daily: upstream says 800 left", reportOf(limitstore.Levels{Requests: math.NaN(), Tokens: 190,
					DailyRequests: 5, DailyTokens: 800}, limitstore.Unknown, 1)},
				{"take 100 more", reserve(main, 1, 100, -1)},
				{"retune to half the burst, keeping the debt", retune(halfSpec(float64(k)))},
				{"take 10", reserve(main, 1, 10, -1)},
				{"the batch lane follows", reserve(batch, 1, 10, -1)},
				{"back without daily buckets", retune(bucketSpec(float64(k)))},
				{"take 10 again", reserve(main, 1, 10, -1)},
			}
		}},
		{"pause and eviction", 100, func(k time.Duration) []step { // a pause of 200s, within MaxPause
			return []step{
				{"pause 2s", pause(2 * time.Second * k)},
				{"a shorter pause is ignored", pause(time.Second * k)},
				{"evict 5s", evict(5 * time.Second * k)},
				{"left", blocked},
				{"main waits for the pause", reserve(main, 1, 1, 0)},
				{"the batch gate ignores it", reserve(batch, 1, 1, 0)},
			}
		}},
		{"batch lane has its share", 1000, func(k time.Duration) []step {
			return []step{
				{"batch burst is 1.5 requests: 1", reserve(batch, 1, 10, 0)},
				{"batch: the half request needs 0.5s at 1/s", reserve(batch, 1, 10, 0)},
				{"main is untouched", reserve(main, 1, 10, 0)},
				{"150 batch tokens exceed what is left", reserve(batch, 0, 150, 0)},
				{"give batch back", adjust(batch, -1, -10)},
				{"batch again", reserve(batch, 1, 10, 0)},
			}
		}},
	}
	srv := startRedis(t)
	rs := srv.store()
	mem := limitstore.NewMemory()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := bucketSpec(c.k)
			a, b := mem.Open(c.name, spec), rs.Open(c.name, spec)
			var lastA, lastB limitstore.Grant
			// The offset of Redis's step from memory's lies in [lo, hi]; the spread of the
			// offsets so far bounds how far the waits may drift apart.
			minLo, maxHi := time.Duration(math.MaxInt64), time.Duration(math.MinInt64)
			for _, s := range c.steps(time.Duration(c.k)) {
				m0 := time.Now()
				om, errm := s.do(ctx(t), a, &lastA)
				m1 := time.Now()
				or, errr := s.do(ctx(t), b, &lastB)
				r1 := time.Now()
				if errm != nil || errr != nil {
					t.Fatalf("%s: errors %v (memory), %v (redis)", s.name, errm, errr)
				}
				minLo, maxHi = min(minLo, -m1.Sub(m0)), max(maxHi, r1.Sub(m0))
				tol := maxHi - minLo + time.Microsecond
				// A level refills by at most the fastest rate (100 tokens a second, divided
				// by k) times the timing's spread.
				units := tol.Seconds() * 100 / c.k
				if om.ok != or.ok || (om.wait-or.wait).Abs() > tol || !sameCounts(om.counts, or.counts, units) {
					t.Fatalf("%s: redis %+v, memory %+v; the steps' timing allows %v", s.name, or, om, tol)
				}
				t.Logf("%s: %+v (within %v)", s.name, or, tol)
			}
		})
	}
}

func TestScopes(t *testing.T) {
	srv := startRedis(t)
	a, b := srv.store(), srv.store()
	other := srv.store(redisstore.WithPrefix("other"))
	// One request an hour: the time the test takes does not refill the bucket.
	spec := limitstore.Spec{Requests: limitstore.Rate{PerSecond: 1.0 / 3600, Burst: 1}, BatchShare: 1}
	take := func(s limitstore.State) bool {
		_, ok, err := reserveWait(s, ctx(t), limitstore.Reservation{Requests: 1, MaxWait: 0})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !take(a.Open("key:1", spec)) {
		t.Fatal("first request refused")
	}
	if take(b.Open("key:1", spec)) {
		t.Fatal("another store on the same prefix did not see the request")
	}
	if !take(other.Open("key:1", spec)) {
		t.Fatal("a store with another prefix shared the scope")
	}
	if !take(b.Open("key:2", spec)) {
		t.Fatal("another scope shared the bucket")
	}
	p1, p2 := a.Open("", spec), a.Open("", spec)
	if !take(p1) || !take(p2) || take(p1) {
		t.Fatal("private scopes must be separate and limited")
	}
	// Every key of a scope shares its hash tag, and every key expires.
	_, _, err := a.Open("key:1", limitstore.Spec{MaxConcurrent: 1}).AcquireSlot(ctx(t), false, 0)
	if err != nil {
		t.Fatal(err)
	}
	rdb := srv.client()
	keys, err := rdb.Keys(ctx(t), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 4 {
		t.Errorf("keys %q, want 3 bucket hashes and a lease set", keys)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "{llmclient:key:1}:") && !strings.HasPrefix(k, "{llmclient:key:2}:") &&
			!strings.HasPrefix(k, "{other:key:1}:") {
			t.Errorf("key %q has no scope hash tag", k)
		}
		if ttl, err := rdb.PTTL(ctx(t), k).Result(); err != nil || ttl <= 0 {
			t.Errorf("key %q: TTL %v, %v, want an expiry", k, ttl, err)
		}
	}
}

func TestRedisErrorsAreNotHidden(t *testing.T) {
	srv := startRedis(t)
	s := srv.store(redisstore.WithFailMode(redisstore.FailClosed))
	st := s.Open("wrongtype", bucketSpec(1))
	// A key of the wrong type makes the script fail: FailClosed refuses, saying why, with an
	// error that wraps ErrUnavailable and the server's error.
	if err := srv.client().Set(ctx(t), "{llmclient:wrongtype}:g", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, _, err := reserveWait(st, ctx(t), limitstore.Reservation{Requests: 1})
	var rerr redis.Error
	if !errors.Is(err, redisstore.ErrUnavailable) || !errors.As(err, &rerr) || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("Reserve: %v, want a refusal wrapping ErrUnavailable and the server's error", err)
	}
	if s.Healthy() {
		t.Error("Healthy after a failed call")
	}
	// A caller's canceled context is its own error.
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := reserveWait(s.Open("fine", bucketSpec(1)), c, limitstore.Reservation{Requests: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Reserve with a canceled context: %v", err)
	}
}

// TestSharedPause: a pause set through one store, as after a 429, holds for the others.
// The pause is long and the bounds are measured, so a slow machine cannot miss it.
func TestSharedPause(t *testing.T) {
	srv := startRedis(t)
	spec := limitstore.Spec{Requests: limitstore.Rate{PerSecond: 100, Burst: 100}, BatchShare: 1}
	a, b := srv.store().Open("cooling", spec), srv.store().Open("cooling", spec)
	const d = 10 * time.Minute
	before := time.Now()
	if err := a.Pause(ctx(t), d); err != nil {
		t.Fatal(err)
	}
	left, err := pausedFor(b, ctx(t))
	if elapsed := time.Since(before); err != nil || left < d-elapsed || left > d {
		t.Fatalf("PauseLeft in another store: %v, %v, want within %v of %v", left, err, elapsed, d)
	}
	wait, ok, err := reserveWait(b, ctx(t), limitstore.Reservation{Requests: 1, MaxWait: 0})
	if elapsed := time.Since(before); err != nil || ok || wait < d-elapsed || wait > d {
		t.Fatalf("Reserve in another store during the pause: %v, %v, %v; want refused with the pause's wait", wait, ok, err)
	}
	if left, err := pausedFor(srv.store().Open("not-cooling", spec), ctx(t)); err != nil || left != 0 {
		t.Fatalf("PauseLeft of another scope: %v, %v", left, err)
	}
}
