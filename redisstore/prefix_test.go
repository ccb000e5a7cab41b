package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/redisstore"
	"github.com/redis/go-redis/v9"
)

// TestPrefixesDoNotInterfere: two applications on one Redis, with different prefixes and
// the same scope names, touch every kind of state (buckets of both lanes, a pause, a sync,
// slots held and a waiter queued); each sees only its own, and every key the store writes
// starts with "{" + prefix + ":" and expires.
func TestPrefixesDoNotInterfere(t *testing.T) {
	srv := startRedis(t)
	a := srv.store(redisstore.WithPrefix("app-a"), redisstore.WithFailMode(redisstore.FailClosed))
	b := srv.store(redisstore.WithPrefix("app-b"), redisstore.WithFailMode(redisstore.FailClosed))
	spec := limitstore.Spec{
		Requests:      limitstore.Rate{PerSecond: 1.0 / 3600, Burst: 2},
		Tokens:        limitstore.Rate{PerSecond: 1.0 / 3600, Burst: 100},
		MaxConcurrent: 1, BatchShare: 0.5,
	}
	for _, scope := range []string{"vendor/key:0123456789abcdef", "partition:team-1"} {
		sa, sb := a.Open(scope, spec), b.Open(scope, spec)
		// Application a empties its buckets, pauses, syncs, holds the slot and queues a waiter.
		for _, lane := range []limitstore.Lane{limitstore.LaneBatch, limitstore.LaneMain} {
			if _, ok, err := reserveWait(sa, ctx(t), limitstore.Reservation{Lane: lane, Requests: 2, Tokens: 100, MaxWait: 0}); err != nil || !ok {
				t.Fatalf("a: Reserve lane %d: %v, %v", lane, ok, err)
			}
		}
		if _, err := report(sa, ctx(t), 0); err != nil {
			t.Fatal(err)
		}
		if err := sa.Pause(ctx(t), time.Minute); err != nil {
			t.Fatal(err)
		}
		la, _, err := sa.AcquireSlot(ctx(t), interactive, 0)
		if err != nil {
			t.Fatal(err)
		}
		waiting, cancel := context.WithCancel(context.Background())
		queued := make(chan error, 1)
		go func() {
			_, _, err := sa.AcquireSlot(waiting, interactive, -1)
			queued <- err
		}()
		waitQueuedIn(t, srv, "app-a", scope, 1)

		// Application b sees none of it.
		if left, err := pausedFor(sb, ctx(t)); err != nil || left != 0 {
			t.Fatalf("b sees a's pause: %v, %v", left, err)
		}
		for _, lane := range []limitstore.Lane{limitstore.LaneBatch, limitstore.LaneMain} {
			if w, ok, err := reserveWait(sb, ctx(t), limitstore.Reservation{Lane: lane, Requests: 1, Tokens: 50, MaxWait: 0}); err != nil || !ok {
				t.Fatalf("b: Reserve lane %d: %v, %v, %v; a's buckets leaked into b's", lane, w, ok, err)
			}
		}
		lb, _, err := sb.AcquireSlot(ctx(t), interactive, 0)
		if err != nil {
			t.Fatalf("b: a's slot or waiter leaked into b's: %v", err)
		}
		sb.ReleaseSlot(lb)
		// And b's activity does not reach a: a's slot is still taken, its waiter still queued.
		if _, _, err := sa.AcquireSlot(ctx(t), interactive, 0); !errors.Is(err, limitstore.ErrRefused) {
			t.Fatalf("a's slot came free through b: %v", err)
		}
		cancel()
		if err := <-queued; !errors.Is(err, context.Canceled) {
			t.Fatalf("a's waiter: %v", err)
		}
		sa.ReleaseSlot(la)
	}
	checkKeys(t, srv.client(), "app-a", "app-b")
}

// checkKeys fails unless every key in Redis starts with "{" + one of the prefixes + ":"
// and expires.
func checkKeys(t *testing.T, rdb *redis.Client, prefixes ...string) {
	t.Helper()
	keys, err := rdb.Keys(ctx(t), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("no keys written")
	}
	for _, k := range keys {
		ok := false
		for _, p := range prefixes {
			ok = ok || strings.HasPrefix(k, "{"+p+":")
		}
		if !ok {
			t.Errorf("key %q is under none of the prefixes %q", k, prefixes)
		}
		if ttl, err := rdb.PTTL(ctx(t), k).Result(); err != nil || ttl <= 0 {
			t.Errorf("key %q: TTL %v, %v; want an expiry", k, ttl, err)
		}
	}
}

// waitQueuedIn waits until n slot waiters are queued on the scope under the prefix.
func waitQueuedIn(t *testing.T, srv *redisServer, prefix, scope string, n int64) {
	t.Helper()
	rdb := srv.client()
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		got, err := rdb.ZCard(ctx(t), "{"+prefix+":"+scope+"}:w").Result()
		if err != nil {
			t.Fatal(err)
		}
		if got == n {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%d waiters queued on %s, want %d", got, scope, n)
		}
	}
}

// TestNoAPIKeyInRedis: a Client with two API keys, limits and partitions, through the
// store, writes no key name, field or member that contains an API key (or a part of one
// long enough to matter).
func TestNoAPIKeyInRedis(t *testing.T) {
	srv := startRedis(t)
	secrets := []string{"sk-proj-7f3Kq9ZxW2mB8vT1nR4yL6pDs0Hj", "sk-ant-api03-Qm5Tz8Lw1Xc4Vb7Nh2Gk9Rf3"}
	p := &holding{inCall: make(chan struct{}), release: make(chan struct{})}
	c, err := llmclient.New(
		llmclient.WithUpstream(llmclient.Upstream{Name: "vendor", Provider: p, Keys: secrets,
			Limits: llmclient.Limits{RPM: 600, TPM: 100_000, MaxConcurrent: 4}}),
		llmclient.WithPartitionLimits("team", llmclient.Limits{RPM: 600}),
		llmclient.WithLimitStore(srv.store()),
	)
	if err != nil {
		t.Fatal(err)
	}
	// Two calls in flight at once hold a slot on each key while Redis is read.
	done := make(chan error, 2)
	for range 2 {
		go func() {
			req := hello()
			req.Metadata = map[string]string{"team": "t1"}
			_, err := c.Complete(context.Background(), req)
			done <- err
		}()
		<-p.inCall
	}
	defer func() {
		close(p.release)
		for range 2 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}()
	rdb := srv.client()
	keys, err := rdb.Keys(ctx(t), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, k := range keys {
		all = append(all, k)
		switch typ, _ := rdb.Type(ctx(t), k).Result(); typ {
		case "hash":
			m, _ := rdb.HGetAll(ctx(t), k).Result()
			for f, v := range m {
				all = append(all, f, v)
			}
		case "zset":
			m, _ := rdb.ZRange(ctx(t), k, 0, -1).Result()
			all = append(all, m...)
		}
	}
	// Per key: the buckets' hash and the slot leases; and the partition's buckets.
	if len(keys) != 5 {
		t.Fatalf("keys %q: want both keys' buckets and leases, and the partition's buckets", keys)
	}
	for _, s := range all {
		for _, secret := range secrets {
			for i := 0; i+8 <= len(secret); i++ {
				if part := secret[i : i+8]; strings.Contains(s, part) {
					t.Fatalf("Redis holds %q, which contains %q of an API key", s, part)
				}
			}
		}
	}
	t.Logf("keys: %q", keys)
}

// holding is a Provider whose calls say they started on inCall and wait for release.
type holding struct {
	inCall, release chan struct{}
}

func (p *holding) Complete(ctx context.Context, _ *llmclient.Call) (*llmclient.Response, error) {
	p.inCall <- struct{}{}
	select {
	case <-p.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &llmclient.Response{Text: "ok", FinishReason: finish.Stop}, nil
}

func (p *holding) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, llmclient.ErrUnsupported
}
