package llmclient_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/health"
	"github.com/llmclient/llmclient/keysource"
	"github.com/llmclient/llmclient/provider/fake"
)

// A source that stays in the list SetKeySources sets keeps its key: label, eviction,
// cached credential; Changed names the sources only when the list changes.
func TestSetKeySourcesKeepsListedSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fetches atomic.Int32
		src1 := keysource.Func(func(context.Context) (string, time.Time, error) {
			fetches.Add(1)
			return "tok1", time.Time{}, nil
		})
		src2 := keysource.Func(func(context.Context) (string, time.Time, error) { return "tok2", time.Time{}, nil })
		var log eventLog
		p := fake.New(fake.Reply("ok").Forever())
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, KeySources: []keysource.Source{src1}}),
			llmclient.WithObserver(log.observe))
		if _, err := c.Complete(context.Background(), chatReq("m")); err != nil {
			t.Fatal(err)
		}
		if err := c.EvictKey("a", "key#1"); err != nil { // src1's token was revoked
			t.Fatal(err)
		}
		if err := c.Update(llmclient.SetKeySources("a", src1, src2)); err != nil {
			t.Fatal(err)
		}
		ks := c.Snapshot().Upstreams[0].Keys
		if len(ks) != 2 || ks[0].Label != "key#1" || ks[0].State != health.KeyEvicted || ks[1].Label != "key#2" || ks[1].State != health.KeyReady {
			t.Fatalf("want src1's key#1 evicted and a new key#2: %+v", ks)
		}
		if changed := lastUpdateChanged(&log); !slices.Equal(changed, []string{"a.KeySources"}) {
			t.Errorf("Changed %v, want [a.KeySources]", changed)
		}
		if err := c.Update(llmclient.SetKeySources("a", src1, src2)); err != nil {
			t.Fatal(err)
		}
		if changed := lastUpdateChanged(&log); len(changed) != 0 {
			t.Errorf("the same sources again: Changed %v, want none", changed)
		}
		if err := c.RestoreKey("a", "key#1"); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := c.Complete(context.Background(), chatReq("m")); err != nil {
				t.Fatal(err)
			}
		}
		if n := fetches.Load(); n != 1 {
			t.Errorf("src1 fetched %d times, want 1 (its credential is kept)", n)
		}
	})
}

// Two closures are two sources, even with the same code: the second replaces the first.
func TestSetKeySourcesNewClosureIsNewSource(t *testing.T) {
	mk := func(tok string) keysource.Source {
		return keysource.Func(func(context.Context) (string, time.Time, error) { return tok, time.Time{}, nil })
	}
	p := fake.New(fake.Reply("ok").Forever())
	c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, KeySources: []keysource.Source{mk("one")}}))
	if err := c.Update(llmclient.SetKeySources("a", mk("two"))); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Complete(context.Background(), chatReq("m")); err != nil {
		t.Fatal(err)
	}
	if ks := c.Snapshot().Upstreams[0].Keys; len(ks) != 1 || ks[0].Label != "key#2" {
		t.Fatalf("the new closure did not get a new key: %+v", ks)
	}
	if lastKey(p) != "two" {
		t.Fatal("the call used the old source's credential")
	}
}
