package llmclient

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/ratelimit"
)

// mirror is an upstream's token bucket, charged as the limiter charges: what a key's
// upstream reports when this process is its only user and every charge is exact.
type mirror struct {
	level, capacity, perSecond float64
	last                       time.Time
}

func (m *mirror) charge(cost float64) {
	now := time.Now()
	m.level = min(m.capacity, m.level+now.Sub(m.last).Seconds()*m.perSecond) - cost
	m.last = now
}

func (m *mirror) report(limit int64) *ratelimit.Status {
	u := max(m.level, 0)
	return &ratelimit.Status{Tokens: ratelimit.Window{Known: true, Limit: limit, Remaining: int64(u),
		Reset: time.Duration((m.capacity - u) / m.perSecond * float64(time.Second))}}
}

// TestHeaderSyncAloneKeepsItsFullRate: a process that spends its key's whole quota sees
// little left in every report, all of it explained by its own admissions: it keeps its
// full rate (the former adaptation cut it by a fifth a second down to a tenth).
func TestHeaderSyncAloneKeepsItsFullRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, Limits{TPM: 60_000}) // 1000 a second, a bucket of 10,000
		up := &mirror{level: 10_000, capacity: 10_000, perSecond: 1000, last: time.Now()}
		start := time.Now()
		admitted := 0
		for time.Since(start) < 2*time.Minute {
			ls, _, err := l.acquire(t.Context(), 1000, ratelimit.Interactive)
			if err != nil {
				t.Fatal(err)
			}
			up.charge(1000)
			l.observe(up.report(60_000), &ls, true)
			ls.release(0, true)
			admitted++
		}
		// 10 from the full bucket, then one a second.
		if admitted < 128 {
			t.Fatalf("%d requests of 1000 tokens admitted in 2 minutes, want ≥ 128 (the full rate)", admitted)
		}
	})
}

// TestHeaderSyncCorrectsTheUnexplainedPart: a report that shows others used 3,000 tokens
// of the key lowers the bucket by those; a report that agrees with the prediction changes
// nothing but the reserve (a tenth of the bucket until the charge is calibrated); a report
// showing more left than this process's own accounting gives back no more than earlier
// reports took.
func TestHeaderSyncCorrectsTheUnexplainedPart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, Limits{TPM: 60_000, TokenBurst: 10_000}) // 1000 a second
		at := func(cost int) (limitLease, time.Duration) {
			start := time.Now()
			ls, _, err := l.acquire(t.Context(), cost, ratelimit.Interactive)
			if err != nil {
				t.Fatal(err)
			}
			return ls, time.Since(start)
		}
		report := func(ls *limitLease, remaining int64) {
			l.observe(&ratelimit.Status{Tokens: ratelimit.Window{Known: true, Remaining: remaining}}, ls, true)
		}
		ls, _ := at(1000) // 9,000 left
		report(&ls, 9_000)
		ls.release(0, true)
		if _, w := at(8_000); w != 0 {
			t.Fatalf("a report that agrees changed the bucket: 8000 tokens (and the reserve of 1000) waited %v", w)
		}
		time.Sleep(11 * time.Second)
		ls, _ = at(1000)
		report(&ls, 6_000) // others used 3,000
		ls.release(0, true)
		if _, w := at(5_000); w != 0 {
			t.Fatalf("after others used 3,000: 5000 tokens waited %v", w)
		}
		if _, w := at(1_000); w != time.Second {
			t.Fatalf("after others used 3,000 and 5,000 more, the reserve of 1,000 is left: 1000 tokens waited %v, want 1s", w)
		}
		time.Sleep(20 * time.Second)
		ls, _ = at(9_000)   // the reserve left
		report(&ls, 10_000) // the upstream says full: give back what reports took (3,000)
		ls.release(0, true)
		if _, w := at(3_000); w != 0 { // 1,000 + 3,000 given back, less the reserve
			t.Fatalf("a report of a full upstream gave back less than reports took: wait %v", w)
		}
		if _, w := at(1); w == 0 {
			t.Fatal("a report raised the bucket above the limiter's own accounting")
		}
	})
}

// TestWindowLearning: limit, remaining and reset tell the window.
func TestWindowLearning(t *testing.T) {
	for _, tc := range []struct {
		name           string
		rw             ratelimit.Window
		known, long    bool
		capacity, rate float64
	}{
		{"minute", ratelimit.Window{Known: true, Limit: 60_000, Remaining: 30_000, Reset: 30 * time.Second}, true, false, 60_000, 1000},
		{"6-second quantum", ratelimit.Window{Known: true, Limit: 60_000, Remaining: 3_000, Reset: 3 * time.Second}, true, false, 6_000, 1000},
		{"full quantum", ratelimit.Window{Known: true, Limit: 60_000, Remaining: 6_000}, true, false, 6_000, 1000},
		{"full minute", ratelimit.Window{Known: true, Limit: 60_000, Remaining: 60_000}, true, false, 60_000, 1000},
		{"a day", ratelimit.Window{Known: true, Limit: 1_000, Remaining: 500, Reset: 12 * time.Hour}, true, true, 1_000, 1_000.0 / 86_400},
		{"a day of 24", ratelimit.Window{Known: true, Limit: 24, Remaining: 12, Reset: 12 * time.Hour}, true, true, 24, 24.0 / 86_400},
		{"a day of 10: a unit an hour at most", ratelimit.Window{Known: true, Limit: 10, Remaining: 5, Reset: 12 * time.Hour}, true, true, 10, 1.0 / 3600},
		{"a lie: one in ten thousand hours", ratelimit.Window{Known: true, Limit: 1, Remaining: 0, Reset: 10_000 * time.Hour}, true, true, 1, 1.0 / 3600},
		{"full and empty", ratelimit.Window{Known: true, Limit: 60_000, Remaining: 0}, false, false, 0, 0},
		{"no limit", ratelimit.Window{Known: true, Remaining: 5}, false, false, 0, 0},
		{"tiny window", ratelimit.Window{Known: true, Limit: 3_600, Remaining: 0, Reset: time.Millisecond}, true, false, 1, 60},
		{"huge", ratelimit.Window{Known: true, Limit: math.MaxInt64, Remaining: math.MaxInt64, Reset: math.MaxInt64}, true, false, math.MaxInt64, math.MaxInt64 / 60.0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w window
			w.learn(tc.rw)
			if w.known != tc.known || w.long != tc.long || !near(w.capacity, tc.capacity) || !near(w.rate, tc.rate) {
				t.Fatalf("learned %+v, want known %v long %v capacity %v rate %v", w, tc.known, tc.long, tc.capacity, tc.rate)
			}
		})
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*max(math.Abs(a), math.Abs(b), 1) }

// TestLimitsPerDay: a daily request quota of 2 refuses the third request at once when a
// deadline is set (its bucket refills in 12 hours), and a daily token quota likewise.
func TestLimitsPerDay(t *testing.T) {
	for _, l := range []Limits{{RPD: 2}, {TPD: 2_000}} {
		synctest.Test(t, func(t *testing.T) {
			lim := newTestLimiter(t, l)
			for range 2 {
				ls, waited, err := lim.acquire(t.Context(), 1_000, ratelimit.Interactive)
				if err != nil || waited != 0 {
					t.Fatalf("%+v: %v after %v", l, err, waited)
				}
				ls.release(0, true)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
			defer cancel()
			start := time.Now()
			_, _, err := lim.acquire(ctx, 1_000, ratelimit.Interactive)
			if !errors.Is(err, ErrRateLimited) || time.Since(start) != 0 {
				t.Fatalf("%+v: third request: %v after %v, want refused at once", l, err, time.Since(start))
			}
		})
	}
}

// TestSizeQuantile: the tracker settles near the 99th percentile of the charges, and the
// margin it asks of a small request is the refill of the difference. Its steps up are
// large, so that the estimate wanders about the percentile (here, of charges uniform up
// to 1,100, above the largest charge as often as not): the test feeds it a seeded stream
// of charges and checks how often a charge lands above it and the average of the
// estimate, and that sampling (one admission in sizeSample) does not bias it.
func TestSizeQuantile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	charge := func() int { return 100 + rng.IntN(1000) } // uniform in [100, 1100): p99 1090
	var q sizeQuantile
	for range 2_000 {
		q.update(charge())
	}
	var sum float64
	above := 0
	const n = 20_000
	for range n {
		c := charge()
		if int64(c) > q.q.Load() {
			above++
		}
		sum += float64(q.q.Load())
		q.update(c)
	}
	if avg := sum / n; avg < 1050 || avg > 1300 {
		t.Fatalf("the estimate averaged %.0f, want about 1090 to 1300 (the 99th percentile and its wander)", avg)
	}
	if share := float64(above) / n; share < 0.005 || share > 0.02 {
		t.Fatalf("%.1f%% of the charges were above the estimate, want about 1%%", 100*share)
	}
	var sampled sizeQuantile
	for range 40_000 {
		sampled.observe(charge())
	}
	if got := sampled.q.Load(); got < 800 || got > 1600 {
		t.Fatalf("sampled: tracked %d, want within the estimate's wander of 1090", got)
	}
	q.q.Store(1000)
	if m := q.margin(int(q.q.Load())-100, int64(time.Millisecond)); m != 100*time.Millisecond {
		t.Fatalf("margin %v, want 100ms", m)
	}
	if m := q.margin(5_000, int64(time.Millisecond)); m != 0 {
		t.Fatalf("a request above the percentile gets margin %v", m)
	}
	if m := q.margin(0, 0); m != 0 {
		t.Fatalf("without a token bucket, margin %v", m)
	}
}

var _ = limitstore.Unknown
