package redisstore_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/llmclient/llmclient/limitstore"
)

// TestSyncReportsOutOfOrderDoNotSkewTheFit is limitstore's test of the same name on Redis
// and, side by side, on the in-memory store: four requests admitted together are counted
// by the upstream last first, so that the report about the last one shows the others
// missing and theirs are stale, after a first report or as the first; the reports that
// follow match their predictions. The fit must stay at 1 in both stores (it was 1.7: the
// report that showed the others missing set the baseline of the next observation).
func TestSyncReportsOutOfOrderDoNotSkewTheFit(t *testing.T) {
	spec := limitstore.Spec{Tokens: limitstore.Rate{PerSecond: 1, Burst: 10_000}} // negligible refill
	rs := startRedis(t).store()
	for _, baseline := range []bool{true, false} {
		for name, open := range map[string]func() limitstore.State{
			"redis":  func() limitstore.State { return rs.Open(fmt.Sprint("out-of-order-", baseline), spec) },
			"memory": func() limitstore.State { return limitstore.NewState(spec) },
		} {
			t.Run(fmt.Sprintf("%s/baseline=%v", name, baseline), func(t *testing.T) {
				if fit := playOutOfOrder(t, open(), baseline); math.Abs(fit.Ratio()-1) > 0.01 || fit.Reports != 4 {
					t.Fatalf("fit %+v: multiplier %.3f, want 1 from 4 observations", fit, fit.Ratio())
				}
			})
		}
	}
}

// playOutOfOrder plays the scenario on st (a token bucket of 10,000) and returns the fit:
// after a first report about a request alone when baseline is set, four requests
// admitted together, counted by the upstream last first, then four reports that match
// their predictions.
func playOutOfOrder(t *testing.T, st limitstore.State, baseline bool) limitstore.Fit {
	t.Helper()
	const burst, cost = 10_000, 300
	reserve := func() limitstore.Grant {
		g, err := st.Reserve(ctx(t), limitstore.Reservation{Tokens: cost, MaxWait: -1})
		if err != nil || !g.OK {
			t.Fatalf("reserve: %+v, %v", g, err)
		}
		return g
	}
	// upstream reports that the upstream had counted n requests of cost when it counted g's.
	upstream := func(g limitstore.Grant, n int) limitstore.Correction {
		target := limitstore.Unknown
		target.Tokens = burst - float64(n*cost)
		c, err := st.Sync(ctx(t), limitstore.Report{Mark: g.Mark, Predicted: g.Levels, Target: target,
			Reserve: limitstore.Unknown, Totals: g.Totals, Gain: 1})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	n := 0
	if baseline {
		n++
		upstream(reserve(), n)
	}
	var together []limitstore.Grant
	for range 4 {
		together = append(together, reserve())
	}
	n++
	if c := upstream(together[3], n); !(math.Abs(c.Made.Tokens) < 1) {
		t.Fatalf("counted before the three admitted just before it: %+v, want no change", c.Made)
	}
	for _, g := range together[:3] {
		n++
		if c := upstream(g, n); !math.IsNaN(c.Made.Tokens) {
			t.Fatalf("a stale report was applied: %+v", c.Made)
		}
	}
	var c limitstore.Correction
	for range 4 {
		n++
		if c = upstream(reserve(), n); !(math.Abs(c.Made.Tokens) < 1) {
			t.Fatalf("report of %d counted: %+v, want no change", n, c.Made)
		}
	}
	return c.Fit
}
