package llmclient_test

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Latency routing: a primary answering after 2–6 s, a secondary after 0.2 s. After a
// warm-up, at least 90% of the calls are served by the secondary, their p99 is at most
// twice the secondary's latency, and the primary is still probed now and then.
func TestLatencyRouting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 7))
		var mu sync.Mutex
		primary := fake.New(fake.Func(func(*llmclient.Call) fake.Step {
			mu.Lock()
			d := 2*time.Second + time.Duration(rng.Int64N(int64(4*time.Second)))
			mu.Unlock()
			return fake.Reply("p").Latency(d)
		}).Forever())
		secondary := fake.New(fake.Reply("s").Latency(200 * time.Millisecond).Forever())
		c := newClient(t, up("primary", primary), up("secondary", secondary),
			llmclient.WithModelGroup("m", "primary", "secondary"), llmclient.WithRouting("m", llmclient.RouteLatency))
		for range 10 { // warm-up
			_, err := c.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
		}
		before := primary.Calls()
		const n = 2000
		var lat []time.Duration
		served := map[string]int{}
		var wg sync.WaitGroup
		var lmu sync.Mutex
		for i := range n {
			wg.Go(func() {
				var resp *llmclient.Response
				var err error
				d := elapsed(func() { resp, err = c.Complete(context.Background(), chatReq("m")) })
				if !assert.NoError(t, err) {
					return
				}
				lmu.Lock()
				lat = append(lat, d)
				served[resp.Upstream]++
				lmu.Unlock()
			})
			if i%10 == 0 {
				time.Sleep(50 * time.Millisecond)
			}
		}
		wg.Wait()
		slices.Sort(lat)
		p99 := lat[len(lat)*99/100]
		assert.GreaterOrEqual(t, served["secondary"], n*9/10, "served: %v", served)
		assert.LessOrEqual(t, p99, 400*time.Millisecond)
		assert.Greater(t, primary.Calls(), before, "the primary is still probed")
	})
}

// Weighted routing draws the first upstream in proportion to the weights.
func TestWeightedRouting(t *testing.T) {
	a := fake.New(fake.Reply("a").Forever())
	b := fake.New(fake.Reply("b").Forever())
	c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: a, Weight: 3}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: b, Weight: 1}),
		llmclient.WithRouting("", llmclient.RouteWeighted))
	for range 4000 {
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
	}
	share := float64(a.Calls()) / 4000
	assert.InDelta(t, 0.75, share, 0.04, "a's share")
}

// Huge weights are clamped, never overflowing the route's total; three upstreams keep
// their proportions.
func TestWeightedRoutingExtremeWeights(t *testing.T) {
	ps := []*fake.Provider{fake.New(fake.Reply("a").Forever()), fake.New(fake.Reply("b").Forever()), fake.New(fake.Reply("c").Forever())}
	c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: ps[0], Weight: math.MaxInt}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: ps[1], Weight: math.MaxInt}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "c", Provider: ps[2]}),
		llmclient.WithRouting("", llmclient.RouteWeighted))
	for range 4000 {
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
	}
	assert.InDelta(t, 2000, ps[0].Calls(), 150)
	assert.InDelta(t, 2000, ps[1].Calls(), 150)
	assert.Less(t, ps[2].Calls(), 10, "weight 1 against 1<<20 twice")

	// Weight 0 counts as 1: an even split.
	ps = []*fake.Provider{fake.New(fake.Reply("a").Forever()), fake.New(fake.Reply("b").Forever()), fake.New(fake.Reply("c").Forever())}
	c = newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: ps[0]}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: ps[1]}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "c", Provider: ps[2], Weight: 1}),
		llmclient.WithRouting("", llmclient.RouteWeighted))
	for range 3000 {
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
	}
	for _, p := range ps {
		assert.InDelta(t, 1000, p.Calls(), 120)
	}
}

// Least-in-flight routing starts each call on the upstream with the fewest calls out.
func TestLeastInFlightRouting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Reply("a").Latency(time.Minute).Forever())
		b := fake.New(fake.Reply("b").Latency(time.Minute).Forever())
		c := newClient(t, up("a", a), up("b", b), llmclient.WithRouting("", llmclient.RouteLeastInFlight))
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() { _, _ = c.Complete(context.Background(), chatReq("m")) })
			synctest.Wait()
		}
		assert.Equal(t, 5, c.InFlight("a"))
		assert.Equal(t, 5, c.InFlight("b"))
		wg.Wait()
	})
}

// Every strategy but ordered starts on an upstream that can serve: an open breaker or
// every key cooling sends the upstream to the back of the route, without a refusal in
// the trace.
func TestRoutingIsHealthAware(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Fail(500), fake.Reply("a").Forever())
		b := fake.New(fake.Reply("b").Forever())
		c := newClient(t, up("a", a), up("b", b), llmclient.WithRouting("", llmclient.RouteLeastInFlight),
			llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute}), llmclient.WithMaxAttempts(1))
		resp, err := c.Complete(context.Background(), chatReq("m")) // a fails and opens, b serves
		require.NoError(t, err)
		require.Equal(t, "b", resp.Upstream)
		for range 5 {
			resp, err := c.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
			assert.Equal(t, "b", resp.Upstream)
			assert.Len(t, resp.Attempts, 1, "a is not even tried while its breaker is open")
		}
	})
}

// Unknown strategies and groups are refused by New.
func TestRoutingOptionsChecked(t *testing.T) {
	p := fake.New(fake.Reply("a"))
	for _, opt := range []llmclient.Option{
		llmclient.WithRouting("", llmclient.Routing(99)),
		llmclient.WithRouting("nope", llmclient.RouteLatency),
		llmclient.WithHedging("", llmclient.Hedge{On: true, Delay: -1}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "w", Provider: p, Weight: -1}),
	} {
		_, err := llmclient.New(up("a", p), opt)
		assert.Error(t, err)
	}
}
