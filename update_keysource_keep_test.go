package llmclient_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/health"
	"github.com/llmclient/llmclient/keysource"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/ratelimit"
)

// lastUpdateChanged returns the Changed of the last "update" control event in log.
func lastUpdateChanged(log *eventLog) []string {
	var changed []string
	for _, e := range log.kinds(event.Control) {
		if e.Action == "update" {
			changed = e.Changed
		}
	}
	return changed
}

// A change that does not set the key sources keeps a keysource.Func source's key: its
// label, its eviction (a revoked credential is not fetched and used again) and its
// cached credential; Changed does not name the sources.
func TestUpdateLimitsKeepsSourceKeyState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fetches atomic.Int32
		src := keysource.Func(func(context.Context) (string, time.Time, error) {
			fetches.Add(1)
			return "tok1", time.Time{}, nil
		})
		var log eventLog
		p := fake.New(fake.Reply("ok").Forever())
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, KeySources: []keysource.Source{src},
			Limits: llmclient.Limits{RPM: 60}}), llmclient.WithObserver(log.observe))
		if _, err := c.Complete(context.Background(), chatReq("m")); err != nil {
			t.Fatal(err)
		}
		if err := c.EvictKey("a", "key#1"); err != nil { // its credential was revoked
			t.Fatal(err)
		}
		for _, ch := range []llmclient.Change{llmclient.SetLimits("a", llmclient.Limits{RPM: 120}),
			llmclient.PatchLimits("a", llmclient.Limits{TPM: 10000}), llmclient.SetKeys("a", "sk-static")} {
			if err := c.Update(ch); err != nil {
				t.Fatal(err)
			}
			ks := c.Snapshot().Upstreams[0].Keys
			if k := ks[len(ks)-1]; k.Label != "key#1" || k.State != health.KeyEvicted {
				t.Errorf("the source key lost its label or eviction: %+v", ks)
			}
			if changed := lastUpdateChanged(&log); slices.Contains(changed, "a.KeySources") {
				t.Errorf("Changed names a.KeySources although the sources did not change: %v", changed)
			}
		}
		if err := c.Update(llmclient.SetKeys("a")); err != nil { // the source key alone again
			t.Fatal(err)
		}
		if _, err := c.Complete(context.Background(), chatReq("m")); err == nil {
			t.Error("a call went out on the evicted source key after a limits change")
		}
		if n := fetches.Load(); n != 1 {
			t.Errorf("the source was fetched %d times, want 1", n)
		}
	})
}

// A limits change keeps the source key's limiter and what it owes: an RPM 1 key that
// spent its request is not given a new one by re-applying its limits.
func TestUpdateLimitsKeepsSourceKeyDebt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := keysource.Func(func(context.Context) (string, time.Time, error) { return "tok", time.Time{}, nil })
		lim := llmclient.Limits{RPM: 1}
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: fake.New(fake.Reply("ok").Forever()),
			KeySources: []keysource.Source{src}, Limits: lim}), llmclient.WithLimiterMode(ratelimit.FailFast))
		if _, err := c.Complete(context.Background(), chatReq("m")); err != nil {
			t.Fatal(err)
		}
		if err := c.Update(llmclient.SetLimits("u", lim)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Complete(context.Background(), chatReq("m")); err == nil {
			t.Fatal("RPM 1 admitted a second request in the minute after the limits were re-applied")
		}
	})
}
