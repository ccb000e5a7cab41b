package redisstore_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/provider/fake"
)

// TestRestartedEmptyRedisForgetsBlocksEverywhere: a Redis that loses its data (FLUSHALL,
// as a restart without persistence) loses the key evictions and breaker trips it held.
// Every replica then follows the store within about a second — the one that made the
// eviction or trip as well as the ones that adopted it — so the replicas agree again
// instead of one keeping a key or an upstream out that the others use.
func TestRestartedEmptyRedisForgetsBlocksEverywhere(t *testing.T) {
	srv := startRedis(t)
	admin := srv.client()
	defer admin.Close()
	synctest.Test(t, func(t *testing.T) {
		replica := func(p llmclient.Provider) *llmclient.Client {
			st, rdb := virtualReplica(t, srv, "restart")
			t.Cleanup(func() { st.Close(); rdb.Close() })
			c, err := llmclient.New(
				llmclient.WithUpstream(llmclient.Upstream{Name: "primary", Provider: p, Keys: []string{"sk-one", "sk-two"}}),
				llmclient.WithUpstream(llmclient.Upstream{Name: "backup", Provider: fake.New(fake.Reply("backup").Forever())}),
				llmclient.WithLimitStore(st), llmclient.WithSharedBreakers("primary"), llmclient.WithMaxAttempts(1),
				llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 2, OpenTimeout: time.Hour, MaxOpenTimeout: time.Hour}),
			)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		pa := fake.New(fake.Reply("primary").Forever())
		pb := fake.New(fake.Reply("primary").Forever())
		a, b := replica(pa), replica(pb)
		keyUsed := func(c *llmclient.Client, p *fake.Provider) bool {
			before := len(p.Requests())
			for range 4 {
				if _, err := c.Complete(context.Background(), chat()); err != nil {
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
		if err := a.EvictKey("primary", "key#1"); err != nil {
			t.Fatal(err)
		}
		if keyUsed(a, pa) || keyUsed(b, pb) {
			t.Fatal("a replica used the evicted key")
		}
		if err := admin.FlushAll(ctx(t)).Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if !keyUsed(a, pa) || !keyUsed(b, pb) {
			t.Errorf("after the data was lost: a uses the key %v, b %v; want both", keyUsed(a, pa), keyUsed(b, pb))
		}

		down := fake.New(fake.Fail(503), fake.Fail(503), fake.Reply("primary").Forever())
		c, d := replica(down), replica(fake.New(fake.Reply("primary").Forever()))
		for range 2 {
			if _, err := c.Complete(context.Background(), chat()); err != nil {
				t.Fatalf("a call with a backup failed: %v", err)
			}
		}
		if resp, err := d.Complete(context.Background(), chat()); err != nil || resp.Upstream != "backup" {
			t.Fatalf("d before the loss: err %v, served by %q; want the backup (the trip is shared)", err, servedBy(resp))
		}
		if err := admin.FlushAll(ctx(t)).Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		for name, r := range map[string]*llmclient.Client{"tripped": c, "adopted": d} {
			resp, err := r.Complete(context.Background(), chat())
			if err != nil || resp.Upstream != "primary" {
				t.Errorf("replica that %s the trip, after the loss: err %v, served by %q; want primary", name, err, servedBy(resp))
			}
		}
	})
}

// servedBy returns the upstream that answered resp, "" without one.
func servedBy(resp *llmclient.Response) string {
	if resp == nil {
		return ""
	}
	return resp.Upstream
}
