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
	"github.com/llmclient/llmclient/routing"
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
			llmclient.WithModelGroup("m", "primary", "secondary"), llmclient.WithRouting("m", routing.Latency))
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
		llmclient.WithRouting("", routing.Weighted))
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
		llmclient.WithRouting("", routing.Weighted))
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
		llmclient.WithRouting("", routing.Weighted))
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
		c := newClient(t, up("a", a), up("b", b), llmclient.WithRouting("", routing.LeastInFlight))
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
		c := newClient(t, up("a", a), up("b", b), llmclient.WithRouting("", routing.LeastInFlight),
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
		llmclient.WithRouting("", routing.Policy(99)),
		llmclient.WithRouting("nope", routing.Latency),
		llmclient.WithHedging("", routing.Hedge{On: true, Delay: -1}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "w", Provider: p, Weight: -1}),
	} {
		_, err := llmclient.New(up("a", p), opt)
		assert.Error(t, err)
	}
}

// pinned runs a call pinned to upstream name in the background, for a test to hold calls
// in flight there.
func pinned(wg *sync.WaitGroup, c *llmclient.Client, name string) {
	ctx := llmclient.WithCallOptions(context.Background(), llmclient.CallOptions{Pin: []string{name}})
	wg.Go(func() { _, _ = c.Complete(ctx, chatReq("m")) })
}

// After the first upstream fails, the rest of the route follows the strategy too: with
// least-in-flight, the upstream with fewer calls out is tried next, whatever the group's
// order.
func TestRoutingFailoverFollowsStrategy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Fail(500), fake.Reply("a").Forever())
		b := fake.New(fake.Reply("b").Latency(time.Minute).Times(2), fake.Reply("b").Forever())
		cu := fake.New(fake.Reply("c").Latency(time.Minute), fake.Reply("c").Forever())
		c := newClient(t, up("a", a), up("b", b), up("c", cu), llmclient.WithModelGroup("m", "a", "b", "c"),
			llmclient.WithRouting("m", routing.LeastInFlight), llmclient.WithMaxAttempts(1))
		var wg sync.WaitGroup
		pinned(&wg, c, "b")
		pinned(&wg, c, "b")
		pinned(&wg, c, "c")
		synctest.Wait()
		resp, err := c.Complete(context.Background(), chatReq("m")) // a: none in flight, fails
		require.NoError(t, err)
		assert.Equal(t, []string{"a", "c"}, upstreamsOf(resp.Attempts), "c (1 in flight) before b (2)")
		wg.Wait()
	})
}

// The rest of the route is ordered by health as it is when the call moves on: an
// upstream whose breaker opened while the first attempt ran goes last, and is not
// refused in the trace.
func TestRoutingFailoverJudgesHealthThen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c *llmclient.Client
		a := fake.New(fake.Func(func(*llmclient.Call) fake.Step {
			c.Breaker("b").ForceOpen() // b cannot serve by the time a fails
			return fake.Fail(500)
		}))
		b := fake.New(fake.Reply("b").Forever())
		cu := fake.New(fake.Reply("c").Forever())
		c = newClient(t, up("a", a), up("b", b), up("c", cu), llmclient.WithModelGroup("m", "a", "b", "c"),
			llmclient.WithRouting("m", routing.LeastInFlight), llmclient.WithMaxAttempts(1))
		resp, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, []string{"a", "c"}, upstreamsOf(resp.Attempts))
		assert.Zero(t, b.Calls())
	})
}

// Weighted routing draws the whole route: the first upstream in proportion to the
// weights, and the next among the others in proportion to theirs.
func TestWeightedRoutingOrdersTheRest(t *testing.T) {
	ps := map[string]*fake.Provider{}
	opts := []llmclient.Option{llmclient.WithRouting("", routing.Weighted), llmclient.WithMaxAttempts(1),
		llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 1 << 30, MinRequests: 1 << 30})}
	for name, w := range map[string]int{"a": 1, "b": 1, "c": 2} {
		ps[name] = fake.New(fake.Fail(500).Forever())
		opts = append(opts, llmclient.WithUpstream(llmclient.Upstream{Name: name, Provider: ps[name], Weight: w}))
	}
	c := newClient(t, opts...)
	const n = 6000
	firsts, seconds := map[string]int{}, map[string]int{}
	for range n {
		_, err := c.Complete(context.Background(), chatReq("m"))
		var e *llmclient.Error
		require.ErrorAs(t, err, &e)
		require.Len(t, e.Attempts, 3)
		firsts[e.Attempts[0].Upstream]++
		if e.Attempts[0].Upstream == "c" {
			seconds[e.Attempts[1].Upstream]++
		}
	}
	assert.InDelta(t, 0.5, float64(firsts["c"])/n, 0.03, "c's share first: %v", firsts)
	assert.InDelta(t, 0.25, float64(firsts["a"])/n, 0.03, "a's share first: %v", firsts)
	// After c, a and b weigh the same.
	assert.InDelta(t, 0.5, float64(seconds["a"])/float64(firsts["c"]), 0.05, "second after c: %v", seconds)
	// After a, c weighs 2 against b's 1: measured over the calls that started on a or b.
	var afterAB, cSecond int
	for range n {
		_, err := c.Complete(context.Background(), chatReq("m"))
		var e *llmclient.Error
		require.ErrorAs(t, err, &e)
		if e.Attempts[0].Upstream != "c" {
			afterAB++
			if e.Attempts[1].Upstream == "c" {
				cSecond++
			}
		}
	}
	assert.InDelta(t, 2.0/3, float64(cSecond)/float64(afterAB), 0.04, "c second after a or b")
}

// Latency routing explores one call in exploreEvery (200): with calls one after another,
// a slower primary gets one call in about 200.
func TestLatencyRoutingExploresOneCallIn200(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := fake.New(fake.Reply("p").Latency(2 * time.Second).Forever())
		secondary := fake.New(fake.Reply("s").Latency(100 * time.Millisecond).Forever())
		c := newClient(t, up("primary", primary), up("secondary", secondary),
			llmclient.WithModelGroup("m", "primary", "secondary"), llmclient.WithRouting("m", routing.Latency))
		for range 2 { // warm-up: each upstream's average is known
			_, err := c.Complete(llmclient.WithCallOptions(context.Background(), llmclient.CallOptions{Pin: []string{"secondary"}}), chatReq("m"))
			require.NoError(t, err)
		}
		_, err := c.Complete(llmclient.WithCallOptions(context.Background(), llmclient.CallOptions{Pin: []string{"primary"}}), chatReq("m"))
		require.NoError(t, err)
		before := primary.Calls()
		const n = 4000
		for range n {
			_, err := c.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
		}
		explored := primary.Calls() - before
		assert.InDelta(t, n/200, explored, 2, "one call in 200 starts on the primary")
	})
}

// WithRouting for "" applies to every route without its own strategy; a group's own
// routing.Default means routing.Ordered; both hold after Client.Update rebuilds the groups.
func TestRoutingPolicyPerGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Reply("a").Latency(time.Minute), fake.Reply("a").Forever())
		b := fake.New(fake.Reply("b").Forever())
		c := newClient(t, up("a", a), up("b", b),
			llmclient.WithModelGroup("lif", "a", "b"), llmclient.WithModelGroup("ord", "a", "b"),
			llmclient.WithRouting("", routing.LeastInFlight), llmclient.WithRouting("ord", routing.Default))
		var wg sync.WaitGroup
		pinned(&wg, c, "a") // a has a call in flight, b none
		synctest.Wait()
		check := func() {
			t.Helper()
			for model, want := range map[string]string{"lif": "b", "ord": "a", "m": "b"} {
				resp, err := c.Complete(context.Background(), chatReq(model))
				require.NoError(t, err)
				assert.Equal(t, want, resp.Upstream, model)
			}
		}
		check()
		require.NoError(t, c.Update(llmclient.SetGroup("lif", "a", "b"), llmclient.SetGroup("ord", "a", "b")))
		check()
		wg.Wait()
	})
}
