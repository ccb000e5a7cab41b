package limitstore_test

import (
	"math"
	"testing"

	"github.com/llmclient/llmclient/limitstore"
)

// TestSyncReportsOutOfOrderDoNotSkewTheFit: requests admitted together reach the upstream
// in any order, so a report can describe a count that did not include requests admitted
// before it. Four requests admitted at one instant are counted last first: the report
// about the last one shows the three others missing (more left than predicted), and the
// reports about them come after it (stale). Once the upstream has counted them all, the
// next reports match the predictions exactly: the charges were right, and the fit must
// say so. It used to book the three missing charges as counted twice (a multiplier of
// 1.7), because the report that showed them missing still set the baseline of the next
// observation: when it made no observation (the upstream nearly full), or when it was the
// scope's first report.
func TestSyncReportsOutOfOrderDoNotSkewTheFit(t *testing.T) {
	for _, c := range []struct {
		name     string
		baseline bool
	}{
		{"after a first report", true},
		{"in the first report", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			// One token a second: the refill during the test is negligible (the checks
			// allow a token).
			st := limitstore.NewState(limitstore.Spec{Tokens: limitstore.Rate{PerSecond: 1, Burst: 10_000}})
			if fit := playOutOfOrder(t, st, c.baseline); math.Abs(fit.Ratio()-1) > 0.01 || fit.Reports != 4 {
				t.Fatalf("fit %+v: multiplier %.3f, want 1 from 4 observations", fit, fit.Ratio())
			}
		})
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
		g, err := st.Reserve(t.Context(), limitstore.Reservation{Tokens: cost, MaxWait: -1})
		if err != nil || !g.OK {
			t.Fatalf("reserve: %+v, %v", g, err)
		}
		return g
	}
	// upstream reports that the upstream had counted n requests of cost when it counted g's.
	upstream := func(g limitstore.Grant, n int) limitstore.Correction {
		target := limitstore.Unknown
		target.Tokens = burst - float64(n*cost)
		c, err := st.Sync(t.Context(), limitstore.Report{Mark: g.Mark, Predicted: g.Levels, Target: target,
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
