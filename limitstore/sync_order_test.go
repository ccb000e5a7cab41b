package limitstore_test

import (
	"math"
	"testing"

	"github.com/llmclient/llmclient/internal/storescenario"
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
			if fit := storescenario.PlayOutOfOrder(t, st, c.baseline); math.Abs(fit.Ratio()-1) > 0.01 || fit.Reports != 4 {
				t.Fatalf("fit %+v: multiplier %.3f, want 1 from 4 observations", fit, fit.Ratio())
			}
		})
	}
}
