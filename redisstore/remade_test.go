package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/redisstore"
	"github.com/redis/go-redis/v9"
)

// members returns how many members the sorted set key holds.
func members(t *testing.T, rdb *redis.Client, key string) int64 {
	t.Helper()
	n, err := rdb.ZCard(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitMembers waits until the sorted set key holds n members: a slot release, or a waiter
// leaving the queue, reaches Redis after the call that made it returned.
func waitMembers(t *testing.T, rdb *redis.Client, key string, n int64) {
	t.Helper()
	for i := 0; ; i++ {
		got := members(t, rdb, key)
		if got == n {
			return
		}
		if i == 10_000 {
			t.Fatalf("%s holds %d members, want %d", key, got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestHoldRemadeAfterRedisLostIt: Redis loses its data (FLUSHALL, as a restart without
// persistence) while a call holds the whole token bucket in flight. The next renewal makes
// the hold again, so the other replicas' bucket stays short of it for the rest of the call
// instead of refilling as if nothing were held; renewals after that keep it once, and the
// call's end ends it once.
func TestHoldRemadeAfterRedisLostIt(t *testing.T) {
	srv := startRedis(t)
	synctest.Test(t, func(t *testing.T) {
		holder, other := replicaPair(t, srv, "remade")
		admin := redis.NewClient(&redis.Options{Addr: srv.addr(), ContextTimeoutEnabled: true})
		defer admin.Close()
		a, b := holder.Open("key", holdSpec), other.Open("key", holdSpec)
		held := func(want float64, want2 int64, when string) {
			t.Helper()
			if got, n := heldTokens(t, admin, "remade", "key"), members(t, admin, "{remade:key}:hz"); got != want || n != want2 {
				t.Fatalf("%s: %v tokens held in %d holds, want %v in %d", when, got, n, want, want2)
			}
		}

		g := holdAll(t, a)
		if err := admin.FlushAll(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(holdLease/3 + 100*time.Millisecond) // one renewal
		held(100, 1, "after a renewal")
		for _, k := range []string{"{remade:key}:g", "{remade:key}:hz"} {
			if ttl, err := admin.PTTL(context.Background(), k).Result(); err != nil || ttl <= 0 {
				t.Fatalf("%s made again has TTL %v, %v", k, ttl, err)
			}
		}
		if takes(t, b, 10) {
			t.Fatal("10 tokens admitted while the whole bucket is held: the lost hold was not made again")
		}
		time.Sleep(2 * holdLease)
		held(100, 1, "after more renewals")
		end(t, a, g, 100)
		held(0, 0, "after the call ended")
		end(t, a, g, 100)
		time.Sleep(holdLease)
		held(0, 0, "after the end came twice and a lease passed")
	})
}

// TestLostHoldsSumHealed: Redis loses the holds (hz) but keeps the scope's hash and its
// sum of them (mh): the hold made again counts once, not on top of the sum it already was
// in.
func TestLostHoldsSumHealed(t *testing.T) {
	srv := startRedis(t)
	synctest.Test(t, func(t *testing.T) {
		s, rdb := virtualReplica(t, srv, "heal")
		defer rdb.Close()
		defer s.Close()
		admin := redis.NewClient(&redis.Options{Addr: srv.addr(), ContextTimeoutEnabled: true})
		defer admin.Close()
		st := s.Open("key", holdSpec)
		g := hold(t, st, 20)
		if err := admin.Del(context.Background(), "{heal:key}:hz").Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(holdLease/3 + 100*time.Millisecond)
		if got, n := heldTokens(t, admin, "heal", "key"), members(t, admin, "{heal:key}:hz"); got != 20 || n != 1 {
			t.Fatalf("%v tokens held in %d holds after a renewal, want 20 in 1", got, n)
		}
		end(t, st, g, 20)
		if got := heldTokens(t, admin, "heal", "key"); got != 0 {
			t.Fatalf("%v tokens held once the call ended", got)
		}
	})
}

// TestSlotRemadeAfterRedisLostIt: Redis loses its data while a call holds the scope's only
// concurrency slot. The next renewal takes the slot's lease again, so no other replica
// gets a slot beyond MaxConcurrent for the rest of the call; the call's release frees it.
func TestSlotRemadeAfterRedisLostIt(t *testing.T) {
	srv := startRedis(t)
	spec := limitstore.Spec{MaxConcurrent: 1, BatchShare: 1}
	synctest.Test(t, func(t *testing.T) {
		holder, other := replicaPair(t, srv, "slotre")
		admin := redis.NewClient(&redis.Options{Addr: srv.addr(), ContextTimeoutEnabled: true})
		defer admin.Close()
		a, b := holder.Open("key", spec), other.Open("key", spec)
		l, _, err := a.AcquireSlot(context.Background(), interactive, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := admin.FlushAll(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(holdLease/3 + 100*time.Millisecond) // one renewal
		if n := members(t, admin, "{slotre:key}:s"); n != 1 {
			t.Fatalf("%d slot leases after a renewal, want the held one", n)
		}
		if lb, _, err := b.AcquireSlot(context.Background(), interactive, 0); !errors.Is(err, limitstore.ErrRefused) {
			if err == nil {
				b.ReleaseSlot(lb)
			}
			t.Fatalf("a second slot while one of one is held: %v, want ErrRefused", err)
		}
		time.Sleep(2 * holdLease)
		if n := members(t, admin, "{slotre:key}:s"); n != 1 {
			t.Fatalf("%d slot leases after more renewals, want the held one", n)
		}
		a.ReleaseSlot(l)
		waitMembers(t, admin, "{slotre:key}:s", 0) // the call's release frees it
		lb, _, err := b.AcquireSlot(context.Background(), interactive, 0)
		if err != nil {
			t.Fatalf("after the release: %v", err)
		}
		b.ReleaseSlot(lb)
	})
}

// TestEndedDuringRenewalStaysEnded: a call ends its hold and releases its slot after the
// renewal took the list of what the process holds and before the renewal reaches Redis.
// The renewal finds them missing and makes them again, then ends and releases them again,
// so that neither outlives its call.
func TestEndedDuringRenewalStaysEnded(t *testing.T) {
	srv := startRedis(t)
	admin := srv.client()
	spec := limitstore.Spec{Tokens: limitstore.Rate{PerSecond: 1000, Burst: 10000}, MaxConcurrent: 1, BatchShare: 1}
	st := srv.store(redisstore.WithPrefix("race")).Open("key", spec)
	other := srv.store(redisstore.WithPrefix("race")).Open("key", spec)
	g := hold(t, st, 50)
	l, _, err := st.AcquireSlot(ctx(t), interactive, 0)
	if err != nil {
		t.Fatal(err)
	}
	redisstore.RenewAround(st, func() {
		end(t, st, g, 50)
		st.ReleaseSlot(l)
	})
	if got, n := heldTokens(t, admin, "race", "key"), members(t, admin, "{race:key}:hz"); got != 0 || n != 0 {
		t.Fatalf("%v tokens held in %d holds after the call ended during a renewal", got, n)
	}
	waitMembers(t, admin, "{race:key}:s", 0) // the release, on its way during the renewal
	lo, _, err := other.AcquireSlot(ctx(t), interactive, 0)
	if err != nil {
		t.Fatalf("the released slot: %v", err)
	}
	other.ReleaseSlot(lo)
}

// TestRemadeAfterRestart: Redis restarts empty (no persistence) while a call holds tokens
// in flight and a slot. The next renewal (or the one the store makes as soon as it sees
// Redis answer again after a failed call) makes both again; the call's end then ends them.
func TestRemadeAfterRestart(t *testing.T) {
	srv := startRedis(t)
	admin := srv.client()
	spec := limitstore.Spec{Tokens: limitstore.Rate{PerSecond: 1000, Burst: 10000}, MaxConcurrent: 1, BatchShare: 1}
	s := srv.store(redisstore.WithPrefix("rs"), redisstore.WithTimeout(time.Second),
		redisstore.WithLeaseTTL(3*time.Second), redisstore.WithProbeInterval(10*time.Millisecond))
	st := s.Open("key", spec)
	g := hold(t, st, 50)
	l, _, err := st.AcquireSlot(ctx(t), interactive, 0)
	if err != nil {
		t.Fatal(err)
	}
	srv.stop()
	srv.start()
	waitBack(t, s)
	// A renewal comes within a second.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if heldTokens(t, admin, "rs", "key") == 50 && members(t, admin, "{rs:key}:hz") == 1 &&
			members(t, admin, "{rs:key}:s") == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart: %v tokens held in %d holds, %d slot leases; want 50 in 1, 1",
				heldTokens(t, admin, "rs", "key"), members(t, admin, "{rs:key}:hz"), members(t, admin, "{rs:key}:s"))
		}
	}
	end(t, st, g, 50)
	st.ReleaseSlot(l)
	if got, n := heldTokens(t, admin, "rs", "key"), members(t, admin, "{rs:key}:hz"); got != 0 || n != 0 {
		t.Fatalf("once the call ended: %v tokens held in %d holds", got, n)
	}
	waitMembers(t, admin, "{rs:key}:s", 0)
}
