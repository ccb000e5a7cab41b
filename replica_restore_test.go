package llmclient_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/provider/fake"
)

// usesKey reports whether c, whose provider is p, calls the key "sk-one" within n calls.
func usesKey(t *testing.T, c *llmclient.Client, p *fake.Provider, n int) bool {
	t.Helper()
	before := len(p.Requests())
	for range n {
		if _, err := c.Complete(context.Background(), chatReq("m")); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range p.Requests()[before:] {
		if r.APIKey == "sk-one" {
			return true
		}
	}
	return false
}

// TestRestoreKeyReachesTheReplicaThatEvicted: with a shared store, a key evicted on
// replica a (by EvictKey, or by a 401) and restored on replica b — as a gateway's admin
// request may land on any replica — is used again by a within about a second, not after
// the whole eviction.
func TestRestoreKeyReachesTheReplicaThatEvicted(t *testing.T) {
	for _, how := range []string{"EvictKey", "401"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := limitstore.NewMemory()
				refuse := how == "401"
				pa := fake.New(fake.Func(func(call *llmclient.Call) fake.Step {
					if refuse && call.APIKey == "sk-one" {
						return fake.Fail(401)
					}
					return fake.Reply("ok")
				}).Times(1 << 20))
				a := newClient(t, up("u", pa, "sk-one", "sk-two"), llmclient.WithLimitStore(store))
				b := newClient(t, up("u", fake.New(fake.Reply("ok").Forever()), "sk-one", "sk-two"), llmclient.WithLimitStore(store))
				if how == "EvictKey" {
					if err := a.EvictKey("u", "key#1"); err != nil {
						t.Fatal(err)
					}
				} else {
					for range 2 { // the pool's least-loaded pick reaches key#1 within two calls
						if _, err := a.Complete(context.Background(), chatReq("m")); err != nil {
							t.Fatal(err)
						}
					}
					refuse = false
				}
				if usesKey(t, a, pa, 6) {
					t.Fatal("a called the key it evicted")
				}
				if err := b.RestoreKey("u", "key#1"); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Second)
				if !usesKey(t, a, pa, 6) {
					t.Error("a did not call the key again after b restored it")
				}
			})
		})
	}
}

// TestResetBreakerReachesTheReplicaThatTripped: with shared breakers, a trip recorded by
// replica a and cleared by ResetBreaker on replica b frees the upstream on a too within
// about a second, not after a's own open period.
func TestResetBreakerReachesTheReplicaThatTripped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := limitstore.NewMemory()
		onA := fake.New(fake.Fail(503), fake.Fail(503), fake.Reply("primary").Forever())
		a := replica(t, store, onA)
		b := replica(t, store, fake.New(fake.Reply("primary").Forever()))
		tripPrimary(t, a)
		if err := b.ResetBreaker("primary"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		resp, err := a.Complete(context.Background(), chatReq("m"))
		if err != nil || resp.Upstream != "primary" {
			t.Errorf("a after b's reset: served by %v, err %v; want primary", upstreamOf(resp), err)
		}
	})
}
