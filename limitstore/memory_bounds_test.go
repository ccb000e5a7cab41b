package limitstore

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"
)

// tokenState is a private state of 1000 tokens a second, a bucket of 10,000.
func tokenState() *memState {
	return newMemState(Spec{Tokens: Rate{PerSecond: 1000, Burst: 10_000}, BatchShare: 1})
}

// reserveWait reserves tokens without a bound and returns the wait.
func reserveWait(t *testing.T, st State, tokens int) time.Duration {
	t.Helper()
	g, err := st.Reserve(t.Context(), Reservation{Requests: 1, Tokens: tokens, MaxWait: -1})
	if !g.OK || err != nil {
		t.Fatalf("Reserve(%d): %+v, err %v", tokens, g, err)
	}
	return g.Wait
}

// TestMemStateHugeChargesAreCapped: a reservation or an adjustment of any size costs at
// most the bucket plus a minute of refill, so the next request waits at most a minute
// (the debt) — never forever, never a negative wait that admits everything.
func TestMemStateHugeChargesAreCapped(t *testing.T) {
	for _, tc := range []struct {
		name   string
		charge func(t *testing.T, st State)
		// next is the wait of a 1-token reservation right after.
		next time.Duration
	}{
		{"reservation 1e13", func(t *testing.T, st State) { reserveWait(t, st, 1e13) }, 60*time.Second + time.Millisecond},
		{"reservation MaxInt", func(t *testing.T, st State) { reserveWait(t, st, math.MaxInt) }, 60*time.Second + time.Millisecond},
		{"adjust 1e9", func(t *testing.T, st State) { st.Adjust(t.Context(), LaneMain, 0, 1e9) }, 60*time.Second + time.Millisecond},
		{"adjust 1e13", func(t *testing.T, st State) { st.Adjust(t.Context(), LaneMain, 0, 1e13) }, 60*time.Second + time.Millisecond},
		{"adjust MaxInt", func(t *testing.T, st State) { st.Adjust(t.Context(), LaneMain, 0, math.MaxInt) }, 60*time.Second + time.Millisecond},
		{"adjust MinInt gives back at most a full bucket", func(t *testing.T, st State) {
			reserveWait(t, st, 10_000)
			st.Adjust(t.Context(), LaneMain, 0, math.MinInt)
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := tokenState()
				tc.charge(t, st)
				if w := reserveWait(t, st, 1); w != tc.next {
					t.Fatalf("next 1-token request waits %v, want %v", w, tc.next)
				}
			})
		})
	}
}

// TestMemStateRepeatedAdjustmentsStopAtTheDebtHorizon: reports of huge usage one after
// another leave at most a minute of debt beyond an empty bucket.
func TestMemStateRepeatedAdjustmentsStopAtTheDebtHorizon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := tokenState()
		for range 100 {
			st.Adjust(t.Context(), LaneMain, 1<<40, 1e13)
		}
		if w := reserveWait(t, st, 1); w != 60*time.Second+time.Millisecond {
			t.Fatalf("after 100 huge reports a request waits %v, want 60.001s", w)
		}
		// Reservations may still queue beyond the horizon: each one is a real request.
		for i := range 3 {
			if w := reserveWait(t, st, 60_000); w < 60*time.Second+time.Duration(i)*60*time.Second {
				t.Fatalf("queued reservation %d waits %v", i, w)
			}
		}
	})
}

// TestMemStateExtremeRates: rates and bursts at the edges of float64 neither panic nor
// produce infinite or negative waits.
func TestMemStateExtremeRates(t *testing.T) {
	for _, tc := range []struct {
		name     string
		r        Rate
		limited  bool
		maxFirst time.Duration // the most the second reservation may wait
	}{
		{"zero", Rate{}, false, 0},
		{"negative", Rate{PerSecond: -5, Burst: 10}, false, 0},
		{"NaN", Rate{PerSecond: math.NaN(), Burst: 10}, false, 0},
		{"+Inf", Rate{PerSecond: math.Inf(1), Burst: 10}, false, 0},
		{"huge", Rate{PerSecond: math.MaxFloat64, Burst: math.MaxFloat64}, true, time.Nanosecond},
		{"NaN burst", Rate{PerSecond: 1, Burst: math.NaN()}, true, 61 * time.Second}, // size 1, a charge of 1 + 60
		{"tiny", Rate{PerSecond: 1e-300, Burst: 1}, true, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				if tc.r.Limited() != tc.limited {
					t.Fatalf("Limited() = %v", tc.r.Limited())
				}
				st := newMemState(Spec{Tokens: tc.r, Requests: tc.r, BatchShare: 1})
				reserveWait(t, st, math.MaxInt)
				w := reserveWait(t, st, 1)
				if w < 0 || w > tc.maxFirst {
					t.Fatalf("second reservation waits %v, want within [0, %v]", w, tc.maxFirst)
				}
			})
		})
	}
}

// reserveGrant reserves tokens without a bound and returns the grant.
func reserveGrant(t *testing.T, st State, tokens int) Grant {
	t.Helper()
	g, err := st.Reserve(t.Context(), Reservation{Requests: 1, Tokens: tokens, MaxWait: -1})
	if !g.OK || err != nil {
		t.Fatalf("Reserve(%d): %+v, err %v", tokens, g, err)
	}
	return g
}

// levels returns Unknown with the tokens count set.
func tokenLevels(tokens float64) Levels {
	l := Unknown
	l.Tokens = tokens
	return l
}

// TestMemStateGrantPredictsLevels: a grant carries the level each main bucket holds right
// after its charge, at the admission time; buckets without limits and the batch lane are
// unknown.
func TestMemStateGrantPredictsLevels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newMemState(Spec{Requests: Rate{PerSecond: 1, Burst: 10}, Tokens: Rate{PerSecond: 1000, Burst: 10_000},
			DailyTokens: Rate{PerSecond: 1, Burst: 86_400}, BatchShare: 0.5})
		g := reserveGrant(t, st, 4_000)
		want := Levels{Requests: 9, Tokens: 6_000, DailyRequests: math.NaN(), DailyTokens: 82_400}
		if !sameLevels(g.Levels, want) || g.Mark <= 0 {
			t.Fatalf("grant %+v, want levels %+v and a mark", g, want)
		}
		g2 := reserveGrant(t, st, 8_000) // waits 2 s for its tokens; at its admission the bucket is empty
		if g2.Wait != 2*time.Second || g2.Levels.Tokens != 0 || g2.Mark <= g.Mark {
			t.Fatalf("second grant %+v, want a 2s wait, 0 tokens left then, a later mark", g2)
		}
		gb, _ := st.Reserve(t.Context(), Reservation{Lane: LaneBatch, Requests: 1, Tokens: 1, MaxWait: -1})
		if !sameLevels(gb.Levels, Unknown) || gb.Mark != 0 {
			t.Fatalf("batch lane grant %+v, want no prediction", gb)
		}
		refused, _ := st.Reserve(t.Context(), Reservation{Requests: 1, Tokens: 10_000, MaxWait: 0})
		if refused.OK || !sameLevels(refused.Levels, Unknown) {
			t.Fatalf("refused grant %+v", refused)
		}
	})
}

// TestMemStateTotals: the sums a grant carries, and what a report's correction covers
// and leaves pending.
func TestMemStateTotals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		st := tokenState()
		g1, _ := st.Reserve(ctx, Reservation{Requests: 1, Tokens: 1_000, Estimate: 800, MaxWait: -1})
		g2, _ := st.Reserve(ctx, Reservation{Requests: 1, Tokens: 2_000, MaxWait: -1}) // no estimate: its tokens
		if g1.Totals != (Totals{Tokens: 1_000, Estimate: 800, Requests: 1}) || g2.Totals != (Totals{Tokens: 3_000, Estimate: 2_800, Requests: 2}) {
			t.Fatalf("grants' totals %+v, %+v", g1.Totals, g2.Totals)
		}
		st.Adjust(ctx, LaneMain, 0, 500)         // usage beyond the charge: tokens only
		st.Adjust(ctx, LaneMain, -1, -1_000)     // a reservation given back
		st.Adjust(ctx, LaneBatch, 1, 1_000)      // the batch lane counts nothing
		st.Adjust(ctx, LaneMain, 0, math.MinInt) // never below zero
		g3, _ := st.Reserve(ctx, Reservation{Requests: 1, Tokens: 100, Estimate: 50, MaxWait: -1})
		if g3.Totals.Tokens != 100 || g3.Totals.Requests != 2 || g3.Totals.Estimate <= 50 {
			t.Fatalf("after adjustments, totals %+v", g3.Totals)
		}
		c, _ := st.Sync(ctx, Report{Mark: g2.Mark, Predicted: g2.Levels, Target: g2.Levels, Totals: g2.Totals})
		if c.Covered != g2.Totals || c.Pending != g3.Totals.Sub(g2.Totals) {
			t.Fatalf("first report covers %+v (want %+v), pending %+v", c.Covered, g2.Totals, c.Pending)
		}
		c, _ = st.Sync(ctx, Report{Mark: g1.Mark, Predicted: g1.Levels, Target: g1.Levels, Totals: g1.Totals})
		if c.Covered != (Totals{}) || !sameLevels(c.Made, Unknown) {
			t.Fatalf("a report not applied covers %+v, made %+v", c.Covered, c.Made)
		}
		c, _ = st.Sync(ctx, Report{Mark: g3.Mark, Predicted: g3.Levels, Target: g3.Levels, Totals: g3.Totals})
		if c.Covered != g3.Totals.Sub(g2.Totals) || c.Pending != (Totals{}) {
			t.Fatalf("second report covers %+v, pending %+v", c.Covered, c.Pending)
		}
	})
}

func sameLevels(a, b Levels) bool {
	same := func(x, y float64) bool { return x == y || math.IsNaN(x) && math.IsNaN(y) }
	return same(a.Requests, b.Requests) && same(a.Tokens, b.Tokens) &&
		same(a.DailyRequests, b.DailyRequests) && same(a.DailyTokens, b.DailyTokens)
}

// TestMemStateSyncCorrectsEachErrorOnce: a report moves the bucket by what the
// prediction got wrong, both ways; a report about a request admitted before an earlier
// correction does not correct that error again, in whatever order reports come, and a
// retune's cut counts as a correction.
func TestMemStateSyncCorrectsEachErrorOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		st := tokenState()
		g1 := reserveGrant(t, st, 2_000) // predicts 8,000 left
		g2 := reserveGrant(t, st, 2_000) // predicts 6,000 left
		// The upstream had 3,000 fewer than predicted at g2: someone else used them.
		if c, _ := st.Sync(ctx, Report{Mark: g2.Mark, Predicted: g2.Levels, Target: tokenLevels(3_000)}); c.Made.Tokens != 3_000 {
			t.Fatalf("first report lowered the bucket by %v, want 3000", c.Made.Tokens)
		}
		// g1's report, arriving later, is about an earlier request: its error is part of
		// what g2's report corrected, whatever it says.
		if c, _ := st.Sync(ctx, Report{Mark: g1.Mark, Predicted: g1.Levels, Target: tokenLevels(9_000)}); !sameLevels(c.Made, Unknown) {
			t.Fatalf("a report about an earlier request changed the bucket by %+v", c.Made)
		}
		if w := reserveWait(t, st, 3_000); w != 0 {
			t.Fatalf("3,000 left after one correction: wait %v", w)
		}
		g3 := reserveGrant(t, st, 1) // predicts -1 (plus the 3,000 corrected)
		// The upstream had 4,000 more than predicted (an overcount): give them back, but
		// no more than reports took before (3,000): a report never raises a bucket above
		// the store's own accounting.
		if c, _ := st.Sync(ctx, Report{Mark: g3.Mark, Predicted: g3.Levels, Target: tokenLevels(g3.Levels.Tokens - 3_000 + 4_000)}); c.Made.Tokens != -3_000 {
			t.Fatalf("overcount: change %v, want -3000", c.Made.Tokens)
		}
		if w := reserveWait(t, st, 2_999); w != 0 {
			t.Fatalf("after giving 3,000 back: wait %v", w)
		}
		if w := reserveWait(t, st, 1); w != time.Millisecond {
			t.Fatalf("given back beyond the store's accounting: the bucket is not empty (wait %v)", w)
		}
		// A report about a request admitted before a correction is corrected by it: g5
		// and g6 both see 2,000 fewer than predicted, g6 corrects nothing more.
		time.Sleep(11 * time.Second) // the bucket is full again
		g5 := reserveGrant(t, st, 1_000)
		g6 := reserveGrant(t, st, 1_000)
		if c, _ := st.Sync(ctx, Report{Mark: g5.Mark, Predicted: g5.Levels, Target: tokenLevels(9_000 - 2_000)}); c.Made.Tokens != 2_000 {
			t.Fatalf("g5's report lowered by %v, want 2000", c.Made.Tokens)
		}
		if c, _ := st.Sync(ctx, Report{Mark: g6.Mark, Predicted: g6.Levels, Target: tokenLevels(8_000 - 2_000)}); c.Made.Tokens != 0 {
			t.Fatalf("g6's report of the same shortfall changed the bucket by %v", c.Made.Tokens)
		}
		// A retune that shrinks the bucket counts as a correction: 4,000 owed of a burst of
		// 10,000, then of 5,000, is a level of 1,000, as the report says.
		time.Sleep(10 * time.Second)
		g4 := reserveGrant(t, st, 4_000) // predicts 6,000
		st.Retune(ctx, Spec{Tokens: Rate{PerSecond: 1000, Burst: 5_000}})
		if c, _ := st.Sync(ctx, Report{Mark: g4.Mark, Predicted: g4.Levels, Target: tokenLevels(1_000)}); c.Made.Tokens != 0 {
			t.Fatalf("after a retune, a report that agrees with it changed the bucket by %v", c.Made.Tokens)
		}
		// Unknown and absurd counts: NaN changes nothing; huge errors are bounded.
		g7 := reserveGrant(t, st, 1)
		if c, _ := st.Sync(ctx, Report{Mark: g7.Mark, Predicted: g7.Levels, Target: Unknown}); !sameLevels(c.Made, Unknown) {
			t.Fatalf("an unknown target changed %+v", c.Made)
		}
		g8 := reserveGrant(t, st, 1)
		st.Sync(ctx, Report{Mark: g8.Mark, Predicted: tokenLevels(math.Inf(1)), Target: tokenLevels(0)})
		g9 := reserveGrant(t, st, 1)
		st.Sync(ctx, Report{Mark: g9.Mark, Predicted: tokenLevels(1e300), Target: tokenLevels(-1e300)})
		if w := reserveWait(t, st, 1); w > 60*time.Second+10*time.Millisecond {
			t.Fatalf("an absurd report left a wait of %v", w)
		}
	})
}

// TestMemStateEvictAndBlocked: an eviction is reported by Blocked, does not delay
// reservations, never shortens and ignores durations that are not positive; huge ones
// saturate.
func TestMemStateEvictAndBlocked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		st := NewMemory().Open("k", Spec{})
		st.Evict(ctx, time.Hour)
		st.Evict(ctx, time.Second)
		st.Evict(ctx, -time.Hour)
		st.Pause(ctx, math.MinInt64)
		if b, _ := st.Blocked(ctx); b != (Block{Evicted: time.Hour}) {
			t.Fatalf("Blocked %+v, want a 1h eviction", b)
		}
		if w := reserveWait(t, st, 5); w != 0 {
			t.Fatalf("an eviction delayed a reservation by %v", w)
		}
		st.Pause(ctx, math.MaxInt64)
		st.Evict(ctx, math.MaxInt64)
		time.Sleep(time.Hour)
		b, _ := st.Blocked(ctx)
		if b.Paused <= 0 || b.Evicted <= 0 || b.Paused > math.MaxInt64 {
			t.Fatalf("huge blocks: %+v", b)
		}
	})
}

// TestMemStateRetune: new rates and bursts keep what each bucket owes; a bucket that had
// no limit starts full, one whose rate goes to zero stops limiting.
func TestMemStateRetune(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		st := tokenState()
		reserveWait(t, st, 4_000) // 6,000 left, 4,000 owed
		st.Retune(ctx, Spec{Tokens: Rate{PerSecond: 100, Burst: 5_000}, Requests: Rate{PerSecond: 1, Burst: 2}})
		if w := reserveWait(t, st, 1_000); w != 0 {
			t.Fatalf("4,000 owed of a new burst of 5,000: a 1000 request waits %v", w)
		}
		if w := reserveWait(t, st, 100); w != time.Second {
			t.Fatalf("at the new rate 100/s, 100 tokens wait %v, want 1s", w)
		}
		st.Retune(ctx, Spec{})
		if w := reserveWait(t, st, 1e9); w != 0 {
			t.Fatalf("after a retune to no limits, wait %v", w)
		}
	})
}

func TestDurationSaturates(t *testing.T) {
	for _, tc := range []struct {
		ns   float64
		want time.Duration
	}{
		{math.NaN(), 0}, {-1, 0}, {0, 0}, {0.2, 1}, {1e9, time.Second},
		{math.MaxInt64, math.MaxInt64}, {1e300, math.MaxInt64}, {math.Inf(1), math.MaxInt64}, {math.Inf(-1), 0},
	} {
		if got := Duration(tc.ns); got != tc.want {
			t.Errorf("Duration(%v) = %v, want %v", tc.ns, got, tc.want)
		}
	}
}

var _ = context.Background
