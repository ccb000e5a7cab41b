package llmclient_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/keysource"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/ratelimit"
)

// sharedSourceReplica is a replica of upstream "u" whose key sources share an RPM 1 quota
// through store; each call takes a second.
func sharedSourceReplica(t *testing.T, store limitstore.Store, sources ...keysource.Source) *llmclient.Client {
	return newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: fake.New(fake.Reply("ok").Latency(time.Second).Forever()),
		KeySources: sources, Limits: llmclient.Limits{RPM: 1}}), llmclient.WithLimitStore(store),
		llmclient.WithLimiterMode(ratelimit.FailFast))
}

// Control for the tests below: two replicas with the same source share its scope.
func TestSourceScopeSharedByReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := limitstore.NewMemory()
		src := keysource.Func(func(context.Context) (string, time.Time, error) { return "tok", time.Time{}, nil })
		a, b := sharedSourceReplica(t, store, src), sharedSourceReplica(t, store, src)
		if _, err := b.Complete(context.Background(), chatReq("m")); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Complete(context.Background(), chatReq("m")); err == nil {
			t.Fatal("RPM 1 shared by two replicas admitted 2 requests in the same minute")
		}
	})
}

// A limits change keeps a source key in the scope it shares with the other replicas.
func TestSourceScopeSharedAfterUpdateLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := limitstore.NewMemory()
		src := keysource.Func(func(context.Context) (string, time.Time, error) { return "tok", time.Time{}, nil })
		a, b := sharedSourceReplica(t, store, src), sharedSourceReplica(t, store, src)
		if err := a.Update(llmclient.SetLimits("u", llmclient.Limits{RPM: 1})); err != nil { // the same limits, re-applied
			t.Fatal(err)
		}
		if _, err := b.Complete(context.Background(), chatReq("m")); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Complete(context.Background(), chatReq("m")); err == nil {
			t.Fatal("RPM 1 shared by two replicas admitted 2 requests in the same minute: the updated replica's source key left the shared scope")
		}
	})
}

// A source set live is in the scope of its position in the list, as in a replica created
// with that list.
func TestSourceScopeOfSourceSetLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := limitstore.NewMemory()
		old := keysource.Func(func(context.Context) (string, time.Time, error) { return "old", time.Time{}, nil })
		rotated := keysource.Func(func(context.Context) (string, time.Time, error) { return "rotated", time.Time{}, nil })
		a, b := sharedSourceReplica(t, store, old), sharedSourceReplica(t, store, rotated)
		if err := a.Update(llmclient.SetKeySources("u", rotated)); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Complete(context.Background(), chatReq("m")); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Complete(context.Background(), chatReq("m")); err == nil {
			t.Fatal("the source set live is not in the scope a replica created with it uses")
		}
	})
}

// A kept source that moves in the list follows its position's scope, and never shares a
// scope with another source of the same replica.
func TestSourceScopeOfMovedSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := limitstore.NewMemory()
		s1 := keysource.Func(func(context.Context) (string, time.Time, error) { return "one", time.Time{}, nil })
		s2 := keysource.Func(func(context.Context) (string, time.Time, error) { return "two", time.Time{}, nil })
		s3 := keysource.Func(func(context.Context) (string, time.Time, error) { return "three", time.Time{}, nil })
		a := sharedSourceReplica(t, store, s1, s2)
		if err := a.Update(llmclient.SetKeySources("u", s2, s3)); err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 2)
		for range 2 { // two calls at once, one on each source: two scopes
			go func() { _, err := a.Complete(context.Background(), chatReq("m")); errs <- err }()
			synctest.Wait()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("%v (two sources share one scope)", err)
			}
		}
		b := sharedSourceReplica(t, store, s2, s3)
		if _, err := b.Complete(context.Background(), chatReq("m")); err == nil {
			t.Fatal("a replica created with the new list does not share its scopes with the updated one")
		}
	})
}
