package redisstore_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient/internal/quotasim"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/redisstore"
	"github.com/redis/go-redis/v9"
)

// simEpoch moves the simulation's virtual clock (testing/synctest starts it in 2000) past
// 2005, where the scripts take a test's clock (redisstore.WithClock).
const simEpoch = 30 * 365 * 24 * time.Hour

// simReplica is one replica's store on the shared redis-server, with its own connection:
// the simulation closes it, in its bubble, when the run ends.
type simReplica struct {
	*redisstore.Store
	rdb *redis.Client
}

func (r simReplica) Close() error {
	r.Store.Close()
	return r.rdb.Close()
}

// TestLimiterQuotaSimulationRedis is the limiter's acceptance simulation (internal/quotasim)
// for four replicas that each keep their limits in their own Store on one real
// redis-server, with every charging model and the overcount ones, against the acceptance
// thresholds. The upstream
// and the Clients run in virtual time; the scripts run on the server and compute with the
// same virtual clock (WithClock), since the server's own would not follow it. Each run
// uses a fresh prefix, so no state carries over between runs.
func TestLimiterQuotaSimulationRedis(t *testing.T) {
	d := redisDeployment(t)
	// The overcount models check the scripts' fit as the in-memory store's
	// (TestLimiterQuotaSimulationOvercount): its multiplier comes down to an upstream
	// that counts much less than the estimates.
	for _, m := range append(quotasim.ChargeModels[:len(quotasim.ChargeModels):len(quotasim.ChargeModels)], quotasim.OvercountModels...) {
		t.Run(strings.ReplaceAll(m.Name, " ", "_"), func(t *testing.T) {
			quotasim.Run(t, filepath.Join("..", "testdata", "corpus"), m, false, d, quotasim.IssueThresholds)
		})
	}
}

// TestLimiterOverloadLatencyRedis is the overload simulation (quotasim.RunOverload) for
// four replicas on one real redis-server, with the default configuration.
func TestLimiterOverloadLatencyRedis(t *testing.T) {
	quotasim.RunOverload(t, filepath.Join("..", "testdata", "corpus"), redisDeployment(t))
}

// redisDeployment is four replicas, each with its own Store on one redis-server started
// for the test, a fresh prefix per run.
func redisDeployment(t *testing.T) quotasim.Deployment {
	srv := startRedis(t)
	runs := 0
	return quotasim.Deployment{Name: "4 replicas, redisstore", Replicas: 4, Store: func() func(int) limitstore.Store {
		runs++
		prefix := "sim" + strings.Repeat("x", runs) // distinct per run
		stores := make(map[int]limitstore.Store)
		return func(i int) limitstore.Store {
			if s, ok := stores[i]; ok {
				return s
			}
			rdb := redis.NewClient(&redis.Options{Addr: srv.addr(), ContextTimeoutEnabled: true})
			st, err := redisstore.New(rdb, redisstore.WithPrefix(prefix), redisstore.WithTimeout(3*time.Second),
				redisstore.WithFailMode(redisstore.FailClosed), // a failure would show as refusals, never hide
				redisstore.WithClock(func() time.Time { return time.Now().Add(simEpoch) }))
			if err != nil {
				t.Fatal(err)
			}
			stores[i] = simReplica{st, rdb}
			return stores[i]
		}
	}}
}

// TestLimiterQuotaSimulationVendorsRedis is the vendor simulation (quotasim.RunVendor) for
// four replicas on one real redis-server, each quota scope and part kept in the store: an
// Anthropic-like model class bound by its input tokens per minute, then by its output
// tokens per minute, and a Gemini-like project shared by three keys, each held to the
// acceptance thresholds (95% of the binding quantity, at most 0.5% of the calls answered
// 429; see the core module's TestLimiterQuotaSimulationVendors).
func TestLimiterQuotaSimulationVendorsRedis(t *testing.T) {
	d := redisDeployment(t)
	for _, v := range quotasim.Vendors {
		t.Run(strings.ReplaceAll(v.Name, " ", "_"), func(t *testing.T) {
			quotasim.RunVendor(t, filepath.Join("..", "testdata", "corpus"), v, d, 0.95, 0.005)
		})
	}
}
