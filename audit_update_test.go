package llmclient_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/health"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/ratelimit"
)

// Claims of docs/operations.md about Update meeting the other controls.

// TestAuditUpdateKeepsWhatItDoesNotTouch: "nothing a change does not touch loses its
// state": a forced-open breaker, a forced-closed one, a drain and an evicted key survive
// an Update that changes every upstream's limits, timeout, weight and keys.
func TestAuditUpdateKeepsWhatItDoesNotTouch(t *testing.T) {
	p := func() *fake.Provider { return fake.New(fake.Reply("ok").Forever()) }
	c := newClient(t, up("open", p(), "k1"), up("closed", p(), "k2"), up("drained", p(), "k3"), up("evicted", p(), "k4", "k5"))
	for _, err := range []error{c.ForceBreakerOpen("open"), c.ForceBreakerClosed("closed"), c.Drain("drained", true),
		c.EvictKey("evicted", "key#1")} {
		if err != nil {
			t.Fatal(err)
		}
	}
	var changes []llmclient.Change
	for _, u := range []string{"open", "closed", "drained", "evicted"} {
		changes = append(changes, llmclient.SetLimits(u, llmclient.Limits{RPM: 600, ITPM: 10_000, OTPM: 2_000, TPD: 1_000_000}),
			llmclient.SetTimeout(u, time.Minute), llmclient.SetWeight(u, 3))
	}
	changes = append(changes, llmclient.SetKeys("evicted", "k4", "k5", "k6"))
	if err := c.Update(changes...); err != nil {
		t.Fatal(err)
	}
	snap := map[string]health.Upstream{}
	for _, u := range c.Snapshot().Upstreams {
		snap[u.Name] = u
	}
	if s := snap["open"]; s.Serving || s.Refusal != "forced_open" {
		t.Errorf("forced open after Update: Serving %v, Refusal %q", s.Serving, s.Refusal)
	}
	if s := snap["closed"]; !s.Breaker.Forced || !s.Serving {
		t.Errorf("forced closed after Update: Forced %v, Serving %v", s.Breaker.Forced, s.Serving)
	}
	if s := snap["drained"]; !s.Drained || s.Refusal != "drained" {
		t.Errorf("drained after Update: Drained %v, Refusal %q", s.Drained, s.Refusal)
	}
	keys := map[string]health.KeyState{}
	for _, k := range snap["evicted"].Keys {
		keys[k.Label] = k.State
	}
	if keys["key#1"] != health.KeyEvicted || keys["key#2"] != health.KeyReady || keys["key#3"] != health.KeyReady {
		t.Errorf("keys after Update: %v; want key#1 evicted, key#2 and the new key#3 ready", keys)
	}
}

// TestAuditUpdateTokenQuantityEdges: PatchLimits and SetLimits refuse a negative ITPM,
// OTPM or TPD (naming it, changing nothing), and accept the largest values, after which a
// call is served.
func TestAuditUpdateTokenQuantityEdges(t *testing.T) {
	c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Reply("ok").Forever()),
		Limits: llmclient.Limits{ITPM: 1000}}))
	for name, ch := range map[string]llmclient.Change{
		"ITPM": llmclient.PatchLimits("a", llmclient.Limits{ITPM: -1}),
		"OTPM": llmclient.PatchLimits("a", llmclient.Limits{OTPM: math.MinInt}),
		"TPD":  llmclient.SetLimits("a", llmclient.Limits{TPD: -1}),
	} {
		err := c.Update(ch)
		if err == nil || !strings.Contains(err.Error(), "negative "+name) || !strings.Contains(err.Error(), "nothing changed") {
			t.Errorf("negative %s: err %v", name, err)
		}
	}
	if err := c.Update(llmclient.PatchLimits("a", llmclient.Limits{ITPM: math.MaxInt, OTPM: math.MaxInt, TPD: math.MaxInt})); err != nil {
		t.Fatal(err)
	}
	req := chatReq("m")
	req.MaxTokens = math.MaxInt
	if _, err := c.Complete(context.Background(), req); err != nil {
		t.Errorf("under the largest token quantities: %v", err)
	}
}

// TestAuditMaxConcurrentChange: "A MaxConcurrent change gives a private state fresh slots
// and leaves a shared scope's slot limit as it was." With one call holding the only slot,
// raising MaxConcurrent to 2 admits a new call at once on a private state; on a shared
// store, the slot limit stays 1 and a new call cannot start while the first holds it.
func TestAuditMaxConcurrentChange(t *testing.T) {
	for _, shared := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			p := fake.New(fake.Reply("slow").Latency(time.Minute), fake.Reply("ok").Forever())
			opts := []llmclient.Option{llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: []string{"k1"},
				Limits: llmclient.Limits{MaxConcurrent: 1}}), llmclient.WithLimiterMode(ratelimit.FailFast)}
			if shared {
				opts = append(opts, llmclient.WithLimitStore(limitstore.NewMemory()))
			}
			c := newClient(t, opts...)
			done := make(chan error, 1)
			go func() { _, err := c.Complete(context.Background(), chatReq("m")); done <- err }()
			synctest.Wait()
			if _, err := c.Complete(context.Background(), chatReq("m")); !errors.Is(err, llmclient.ErrRateLimited) {
				t.Fatalf("shared=%v: the second call before the change: %v, want ErrRateLimited", shared, err)
			}
			if err := c.Update(llmclient.PatchLimits("a", llmclient.Limits{MaxConcurrent: 2})); err != nil {
				t.Fatal(err)
			}
			_, err := c.Complete(context.Background(), chatReq("m"))
			switch {
			case !shared && err != nil:
				t.Errorf("private state after raising MaxConcurrent: %v, want a fresh slot", err)
			case shared && llmclient.ClassOf(err) != failure.RateLimited:
				t.Errorf("shared store after raising MaxConcurrent: %v, want the slot limit as it was", err)
			}
			if err := <-done; err != nil {
				t.Errorf("the call in flight: %v", err)
			}
		})
	}
}

// TestAuditSharedTripUnderNoFailover: a breaker tripped by another replica refuses a call
// kept on that upstream (NoFailover) at once, as unavailable with ErrCircuitOpen, without
// calling it.
func TestAuditSharedTripUnderNoFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := limitstore.NewMemory()
		a := replica(t, store, fake.New(fake.Fail(500).Forever()))
		onB := fake.New(fake.Reply("primary").Forever())
		b := replica(t, store, onB)
		tripPrimary(t, a)
		var err error
		d := elapsed(func() {
			_, err = b.Complete(withOpts(context.Background(), llmclient.CallOptions{Pin: []string{"primary"}, NoFailover: true}), chatReq("m"))
		})
		if !errors.Is(err, llmclient.ErrCircuitOpen) || llmclient.ClassOf(err) != failure.Unavailable || d != 0 || onB.Calls() != 0 {
			t.Errorf("NoFailover on a shared trip: err %v (class %v) after %v, calls %d; want ErrCircuitOpen, unavailable, at once, none",
				err, llmclient.ClassOf(err), d, onB.Calls())
		}
	})
}

// TestAuditPatchLimitsSetsTokenQuantities: PatchLimits "changes only the fields of the
// upstream's Limits that l sets", ITPM and OTPM included: a patched input or output limit
// meters the next calls (fail-fast: the second of two calls that fill it is refused) and
// keeps the RPM set before.
func TestAuditPatchLimitsSetsTokenQuantities(t *testing.T) {
	for _, lim := range []llmclient.Limits{{ITPM: 1200}, {OTPM: 1200}} {
		p := fake.New(fake.Reply("ok").Forever())
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: []string{"sk-one"},
			Limits: llmclient.Limits{RPM: 600}}), llmclient.WithLimiterMode(ratelimit.FailFast))
		if err := c.Update(llmclient.PatchLimits("a", lim)); err != nil {
			t.Fatal(err)
		}
		req := chatReq("m")
		req.Messages[0] = llmclient.UserMessage(strings.Repeat("lorem ipsum dolor sit amet ", 200)) // ~1,000 tokens
		req.MaxTokens = 1200
		if _, err := c.Complete(context.Background(), req); err != nil {
			t.Fatalf("%+v: first call: %v", lim, err)
		}
		if _, err := c.Complete(context.Background(), req); llmclient.ClassOf(err) != failure.RateLimited {
			t.Errorf("%+v patched: second call %v, want rate_limited", lim, err)
		}
		snap := c.Snapshot().Upstreams[0].Keys[0]
		if snap.Requests == nil {
			t.Errorf("%+v patched: the RPM limit set before is gone", lim)
		}
	}
}
