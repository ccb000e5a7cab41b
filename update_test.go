package llmclient_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/ratelimit"
	"github.com/llmclient/llmclient/routing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Live updates of keys, limits, timeouts, weights and groups.

func keysUsed(p *fake.Provider) []string {
	var out []string
	for _, r := range p.Requests() {
		if !slices.Contains(out, r.APIKey) {
			out = append(out, r.APIKey)
		}
	}
	slices.Sort(out)
	return out
}

func keyLabels(c *llmclient.Client, upstream int) []string {
	var out []string
	for _, k := range c.Snapshot().Upstreams[upstream].Keys {
		out = append(out, k.Label+" "+string(k.State))
	}
	return out
}

func TestUpdateKeysKeepsTheirState(t *testing.T) {
	p := fake.New(fake.Reply("ok").Forever())
	c := newClient(t, up("a", p, "sk-one", "sk-two"))
	require.NoError(t, c.EvictKey("a", "key#2"))
	require.NoError(t, c.Update(llmclient.SetKeys("a", "sk-one", "sk-two", "sk-three")))
	assert.Equal(t, []string{"key#1 ready", "key#2 evicted", "key#3 ready"}, keyLabels(c, 0),
		"kept keys keep their labels and evictions; a new key takes the next label")
	require.NoError(t, c.EvictKey("a", "key#1"))
	for range 3 {
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
	}
	assert.Equal(t, []string{"sk-three"}, keysUsed(p), "key#2 is still evicted, the new key serves")
	require.NoError(t, c.RestoreKey("a", "key#1"))

	// A limits change keeps the eviction too.
	require.NoError(t, c.Update(llmclient.SetLimits("a", llmclient.Limits{RPM: 600})))
	assert.Equal(t, []string{"key#1 ready", "key#2 evicted", "key#3 ready"}, keyLabels(c, 0))

	// A removed key takes no new calls.
	require.NoError(t, c.Update(llmclient.SetKeys("a", "sk-three")))
	assert.Equal(t, []string{"key#3 ready"}, keyLabels(c, 0))
	n := len(p.Requests())
	for range 3 {
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
	}
	for _, r := range p.Requests()[n:] {
		assert.Equal(t, "sk-three", r.APIKey)
	}
}

func TestUpdateRemovedKeyFinishesItsCall(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	p := fake.New(fake.Func(func(call *llmclient.Call) fake.Step {
		if call.APIKey == "sk-old" {
			started <- struct{}{}
			<-release
		}
		return fake.Reply("from " + call.APIKey)
	}).Forever())
	c := newClient(t, up("a", p, "sk-old"))
	done := make(chan error, 1)
	var resp *llmclient.Response
	go func() {
		var err error
		resp, err = c.Complete(context.Background(), chatReq("m"))
		done <- err
	}()
	<-started
	require.NoError(t, c.Update(llmclient.SetKeys("a", "sk-new")))
	assert.Equal(t, 1, c.InFlight("a"), "the removed key's call is still counted")
	r2, err := c.Complete(context.Background(), chatReq("m"))
	require.NoError(t, err)
	assert.Equal(t, "from sk-new", r2.Text)
	close(release)
	require.NoError(t, <-done)
	assert.Equal(t, "from sk-old", resp.Text, "the call in flight on the removed key finished")
	assert.Zero(t, c.InFlight("a"))
}

func TestUpdateInvalidChangesNothing(t *testing.T) {
	p := fake.New(fake.Reply("ok").Forever())
	q := fake.New(fake.Reply("ok").Forever())
	c := newClient(t, up("a", p, "sk-one"), up("b", q), llmclient.WithModelGroup("chat", "a", "b"))
	cases := map[string][]llmclient.Change{
		"negative timeout":  {llmclient.SetKeys("a", "sk-two"), llmclient.SetTimeout("a", -time.Second)},
		"negative weight":   {llmclient.SetKeys("a", "sk-two"), llmclient.SetWeight("a", -1)},
		"min int weight":    {llmclient.SetKeys("a", "sk-two"), llmclient.SetWeight("a", math.MinInt)},
		"empty key":         {llmclient.SetKeys("a", "sk-two", "")},
		"nil source":        {llmclient.SetKeys("a", "sk-two"), llmclient.SetKeySources("a", nil)},
		"bad limits":        {llmclient.SetKeys("a", "sk-two"), llmclient.SetLimits("a", llmclient.Limits{RPM: -1})},
		"unknown upstream":  {llmclient.SetKeys("a", "sk-two"), llmclient.SetTimeout("zz", time.Second)},
		"unknown group":     {llmclient.SetKeys("a", "sk-two"), llmclient.SetGroup("nope", "a")},
		"empty group":       {llmclient.SetKeys("a", "sk-two"), llmclient.SetGroup("chat")},
		"group of unknowns": {llmclient.SetKeys("a", "sk-two"), llmclient.SetGroup("chat", "b", "zz")},
		"zero change":       {llmclient.SetKeys("a", "sk-two"), {}},
	}
	for name, changes := range cases {
		err := c.Update(changes...)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "nothing changed", name)
		assert.NotContains(t, err.Error(), "sk-", name)
	}
	for range 3 {
		resp, err := c.Complete(context.Background(), chatReq("chat"))
		require.NoError(t, err)
		assert.Equal(t, "a", resp.Upstream)
	}
	assert.Equal(t, []string{"sk-one"}, keysUsed(p))
	assert.Equal(t, []string{"key#1 ready"}, keyLabels(c, 0))
}

func TestUpdateTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("slow").Latency(2 * time.Second).Forever())
		c := newClient(t, up("a", p), llmclient.WithMaxAttempts(1))
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		require.NoError(t, c.Update(llmclient.SetTimeout("a", time.Second)))
		start := time.Now()
		_, err = c.Complete(context.Background(), chatReq("m"))
		assert.Equal(t, failure.Timeout, llmclient.ClassOf(err))
		assert.Equal(t, time.Second, time.Since(start))
		require.NoError(t, c.Update(llmclient.SetTimeout("a", 0))) // back to WithAttemptTimeout's
		_, err = c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
	})
}

func TestUpdateGroupMembers(t *testing.T) {
	a := fake.New(fake.Reply("a").Forever())
	b := fake.New(fake.Reply("b").Forever())
	c := newClient(t, up("a", a), up("b", b), llmclient.WithModelGroup("chat", "a"))
	resp, err := c.Complete(context.Background(), chatReq("chat"))
	require.NoError(t, err)
	assert.Equal(t, "a", resp.Upstream)
	require.NoError(t, c.Update(llmclient.SetGroup("chat", "b", "a")))
	resp, err = c.Complete(context.Background(), chatReq("chat"))
	require.NoError(t, err)
	assert.Equal(t, "b", resp.Upstream)
}

func TestUpdateWeight(t *testing.T) {
	a := fake.New(fake.Reply("a").Forever())
	b := fake.New(fake.Reply("b").Forever())
	c := newClient(t, up("a", a), up("b", b), llmclient.WithModelGroup("chat", "a", "b"),
		llmclient.WithRouting("chat", routing.Weighted))
	require.NoError(t, c.Update(llmclient.SetWeight("a", 1<<20), llmclient.SetWeight("b", 0)))
	served := map[string]int{}
	for range 200 {
		resp, err := c.Complete(context.Background(), chatReq("chat"))
		require.NoError(t, err)
		served[resp.Upstream]++
	}
	assert.Greater(t, served["a"], 190, "a weight of 1<<20 against 1 takes nearly every call: %v", served)
	require.NoError(t, c.Update(llmclient.SetWeight("a", 0), llmclient.SetWeight("b", math.MaxInt)))
	served = map[string]int{}
	for range 200 {
		resp, err := c.Complete(context.Background(), chatReq("chat"))
		require.NoError(t, err)
		served[resp.Upstream]++
	}
	assert.Greater(t, served["b"], 190, "MaxInt clamps to 1<<20: %v", served)
}

func TestUpdateLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("ok").Forever())
		c := newClient(t, up("a", p, "sk-one"), llmclient.WithLimiterMode(ratelimit.FailFast))
		for range 5 {
			_, err := c.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err, "no limits yet")
		}
		require.NoError(t, c.Update(llmclient.SetLimits("a", llmclient.Limits{RPM: 1, RequestBurst: 1})))
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		_, err = c.Complete(context.Background(), chatReq("m"))
		assert.Equal(t, failure.RateLimited, llmclient.ClassOf(err), "the new limit holds")
		assert.Equal(t, 6, p.Calls())
		require.NoError(t, c.Update(llmclient.SetLimits("a", llmclient.Limits{})))
		_, err = c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err, "limits removed")

		// A token limit set live makes the Client estimate requests from then on.
		require.NoError(t, c.Update(llmclient.SetLimits("a", llmclient.Limits{TPM: 60, TokenBurst: 5})))
		_, err = c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err, "a full bucket admits a request larger than itself, into debt")
		_, err = c.Complete(context.Background(), chatReq("m"))
		assert.Equal(t, failure.RateLimited, llmclient.ClassOf(err), "the debt refuses the next")
	})
}

// TestUpdateWhileCallsInFlight runs calls on every goroutine while another changes every
// setting: under -race nothing races, every call ends with an answer, and only keys that
// were configured are ever used.
func TestUpdateWhileCallsInFlight(t *testing.T) {
	a := fake.New(fake.Reply("a").Forever())
	b := fake.New(fake.Reply("b").Forever())
	c := newClient(t, up("a", a, "sk-1"), up("b", b, "sk-b"), llmclient.WithModelGroup("chat", "a", "b"),
		llmclient.WithRouting("chat", routing.Weighted))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := c.Complete(context.Background(), chatReq("chat")); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				c.Snapshot()
			}
		}()
	}
	for i := range 300 {
		k := fmt.Sprintf("sk-%d", i%5+1)
		err := c.Update(
			llmclient.SetKeys("a", k, "sk-1"),
			llmclient.SetLimits("a", llmclient.Limits{RPM: 6000 + i, MaxConcurrent: 1 + i%3}),
			llmclient.SetTimeout("a", time.Duration(1+i%3)*time.Minute),
			llmclient.SetWeight("b", i%4),
			llmclient.SetGroup("chat", []string{"a", "b"}[i%2], []string{"a", "b"}[(i+1)%2]),
		)
		require.NoError(t, err)
	}
	cancel()
	wg.Wait()
	assert.Empty(t, errs)
	for _, k := range keysUsed(a) {
		assert.Contains(t, []string{"sk-1", "sk-2", "sk-3", "sk-4", "sk-5"}, k)
	}
	assert.Zero(t, c.InFlight("a")+c.InFlight("b"), "every lease returned")
	assert.NoError(t, c.Update(), "an empty update is valid")
}

func TestUpdateLimitsKeepsWhatIsOwed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("ok").Forever())
		c := newClient(t, up("a", p, "sk-one"), llmclient.WithLimiterMode(ratelimit.FailFast))
		require.NoError(t, c.Update(llmclient.SetLimits("a", llmclient.Limits{RPM: 1, RequestBurst: 1})))
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		// A higher rate keeps the request just charged: the bucket is still empty.
		require.NoError(t, c.Update(llmclient.SetLimits("a", llmclient.Limits{RPM: 2, RequestBurst: 1})))
		_, err = c.Complete(context.Background(), chatReq("m"))
		assert.Equal(t, failure.RateLimited, llmclient.ClassOf(err), "what was charged stays charged")
		time.Sleep(30 * time.Second) // one request's worth at the new rate
		_, err = c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err, "and refills at the new rate")
	})
}

func TestUpdateLimitsReachesReplicasSharingTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := limitstore.NewMemory()
		tight := llmclient.Limits{RPM: 1, RequestBurst: 1}
		replica := func() *llmclient.Client {
			return newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Reply("ok").Forever()),
				Keys: []string{"sk-shared"}, Limits: tight}), llmclient.WithLimitStore(store),
				llmclient.WithLimiterMode(ratelimit.FailFast))
		}
		a, b := replica(), replica()
		_, err := a.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		_, err = b.Complete(context.Background(), chatReq("m"))
		assert.Equal(t, failure.RateLimited, llmclient.ClassOf(err), "one quota for both")
		require.NoError(t, a.Update(llmclient.SetLimits("a", llmclient.Limits{RPM: 6000, RequestBurst: 100})))
		time.Sleep(time.Second)
		for range 50 {
			_, err = b.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err, "B enforces the limits A set on the shared key")
		}
	})
}
