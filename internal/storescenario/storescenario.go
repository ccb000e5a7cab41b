// Package storescenario holds scenarios that every limitstore.State must play the same way,
// shared by limitstore's tests (in memory) and redisstore's (on a real redis-server). It is
// for tests only.
package storescenario

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/llmclient/llmclient/limitstore"
)

// PlayOutOfOrder plays the scenario on st (a token bucket of 10,000) and returns the fit:
// after a first report about a request alone when baseline is set, four requests
// admitted together, counted by the upstream last first, then four reports that match
// their predictions.
func PlayOutOfOrder(t testing.TB, st limitstore.State, baseline bool) limitstore.Fit {
	t.Helper()
	// A guard against a store call that hangs (a Redis that stops answering), far longer
	// than any call takes on a loaded machine.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const burst, cost = 10_000, 300
	reserve := func() limitstore.Grant {
		g, err := st.Reserve(ctx, limitstore.Reservation{Tokens: cost, MaxWait: -1})
		if err != nil || !g.OK {
			t.Fatalf("reserve: %+v, %v", g, err)
		}
		return g
	}
	// upstream reports that the upstream had counted n requests of cost when it counted g's.
	upstream := func(g limitstore.Grant, n int) limitstore.Correction {
		target := limitstore.Unknown
		target.Tokens = burst - float64(n*cost)
		c, err := st.Sync(ctx, limitstore.Report{Mark: g.Mark, Predicted: g.Levels, Target: target,
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
