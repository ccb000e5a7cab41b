package redisstore_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/llmclient/llmclient/internal/storescenario"
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
				if fit := storescenario.PlayOutOfOrder(t, open(), baseline); math.Abs(fit.Ratio()-1) > 0.01 || fit.Reports != 4 {
					t.Fatalf("fit %+v: multiplier %.3f, want 1 from 4 observations", fit, fit.Ratio())
				}
			})
		}
	}
}
