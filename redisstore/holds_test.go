package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/redisstore"
	"github.com/redis/go-redis/v9"
)

// holdSpec is a token bucket of 100 that refills 10 a second: a hold of the whole bucket
// keeps it empty, and without one it is full again in 10 s.
var holdSpec = limitstore.Spec{Tokens: limitstore.Rate{PerSecond: 10, Burst: 100}, BatchShare: 1}

// holdLease is the lease of the stores in the virtual-time hold tests.
const holdLease = 3 * time.Second

// virtualReplica is a Store on its own connection that computes with the bubble's clock
// (run inside a synctest bubble, with a lease of holdLease).
func virtualReplica(t *testing.T, srv *redisServer, prefix string) (*redisstore.Store, *redis.Client) {
	rdb := redis.NewClient(&redis.Options{Addr: srv.addr(), ContextTimeoutEnabled: true})
	st, err := redisstore.New(rdb, redisstore.WithPrefix(prefix), redisstore.WithTimeout(time.Second),
		redisstore.WithLeaseTTL(holdLease), redisstore.WithFailMode(redisstore.FailClosed),
		redisstore.WithClock(func() time.Time { return time.Now().Add(simEpoch) }))
	if err != nil {
		t.Fatal(err)
	}
	return st, rdb
}

// replicaPair opens two replicas of prefix on srv with virtualReplica, closed (store, then
// client) when the test ends. In a synctest bubble it must be called inside it.
func replicaPair(t *testing.T, srv *redisServer, prefix string) (a, b *redisstore.Store) {
	t.Helper()
	a, rdbA := virtualReplica(t, srv, prefix)
	b, rdbB := virtualReplica(t, srv, prefix)
	t.Cleanup(func() {
		a.Close()
		rdbA.Close()
		b.Close()
		rdbB.Close()
	})
	return a, b
}

// takes reports whether st admits tok tokens at once.
func takes(t *testing.T, st limitstore.State, tok int) bool {
	t.Helper()
	g, err := st.Reserve(t.Context(), limitstore.Reservation{Tokens: tok, MaxWait: 0})
	if err != nil {
		t.Fatal(err)
	}
	return g.OK
}

// holdAll reserves the whole bucket of holdSpec on st, held in flight.
func holdAll(t *testing.T, st limitstore.State) limitstore.Grant {
	t.Helper()
	g, err := st.Reserve(t.Context(), limitstore.Reservation{Requests: 1, Tokens: 100, MaxWait: 0, InFlight: true})
	if err != nil || !g.OK {
		t.Fatalf("hold: %+v, %v", g, err)
	}
	return g
}

// TestCrashedReplicasHoldEndsWithItsLease: a replica that holds the whole token bucket in
// flight and dies without ending the hold (its Store stops renewing, nothing is released)
// keeps the other replicas' bucket empty for its lease only: once the lease has passed,
// the bucket refills for them. Before the holds had leases, it stayed empty until the
// scope's hash expired, an hour after the last call.
func TestCrashedReplicasHoldEndsWithItsLease(t *testing.T) {
	srv := startRedis(t)
	synctest.Test(t, func(t *testing.T) {
		crashed, rdbA := virtualReplica(t, srv, "crash")
		alive, rdbB := virtualReplica(t, srv, "crash")
		defer rdbB.Close()
		defer alive.Close()
		holdAll(t, crashed.Open("key", holdSpec))
		crashed.Close() // the replica dies: its holds are no longer renewed, nor ended
		rdbA.Close()

		b := alive.Open("key", holdSpec)
		time.Sleep(2 * time.Second) // within the lease: 20 tokens would have refilled without the hold
		if takes(t, b, 10) {
			t.Fatal("10 tokens admitted while the whole bucket is held")
		}
		time.Sleep(holdLease) // 5 s: the lease has passed
		if !takes(t, b, 10) {
			t.Fatal("the crashed replica's hold outlived its lease")
		}
		// The bucket refills at its rate from then on: full 10 s later.
		time.Sleep(10 * time.Second)
		if !takes(t, b, 90) {
			t.Fatal("the bucket did not refill after the hold ended")
		}
	})
}

// TestLiveReplicasHoldOutlastsTheLease: a replica alive in a call longer than many leases
// keeps its hold (its Store renews it), and the other replicas' bucket refills once it
// ends the hold.
func TestLiveReplicasHoldOutlastsTheLease(t *testing.T) {
	srv := startRedis(t)
	synctest.Test(t, func(t *testing.T) {
		holder, other := replicaPair(t, srv, "live")
		a, b := holder.Open("key", holdSpec), other.Open("key", holdSpec)
		g := holdAll(t, a)
		for i := range 6 { // 18 s, six leases; the bucket would have refilled in 10 s
			time.Sleep(holdLease)
			if takes(t, b, 10) {
				t.Fatalf("10 tokens admitted %v into a call that holds the bucket", time.Duration(i+1)*holdLease)
			}
		}
		// The call ends; the vendor counted what was charged.
		if err := a.(limitstore.InFlightAdjuster).AdjustInFlight(t.Context(), g.Mark, 100, 0, 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if !takes(t, b, 10) {
			t.Fatal("the bucket does not refill once the hold ended")
		}
	})
}

// heldTokens is what the scope's hash in Redis says is held in flight (mh), for the tests
// of the cases the admissions cannot tell apart from the outside.
func heldTokens(t *testing.T, rdb *redis.Client, prefix, scope string) float64 {
	t.Helper()
	v, err := rdb.HGet(ctx(t), "{"+prefix+":"+scope+"}:g", "mh").Result()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	x, err := strconv.ParseFloat(v, 64)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// hold reserves tok tokens held in flight on st.
func hold(t *testing.T, st limitstore.State, tok int) limitstore.Grant {
	t.Helper()
	g, err := st.Reserve(ctx(t), limitstore.Reservation{Requests: 1, Tokens: tok, MaxWait: 0, InFlight: true})
	if err != nil || !g.OK {
		t.Fatalf("hold %d: %+v, %v", tok, g, err)
	}
	return g
}

// end ends the hold of g's reservation of tok tokens, its charge as counted.
func end(t *testing.T, st limitstore.State, g limitstore.Grant, tok int) {
	t.Helper()
	if err := st.(limitstore.InFlightAdjuster).AdjustInFlight(ctx(t), g.Mark, tok, 0, 0); err != nil {
		t.Fatal(err)
	}
}

// TestHoldEndsOnce: a hold ends once, whatever comes twice or is lost in between. A
// release run twice in Redis, or made twice, ends one hold; after Redis lost its data (FLUSHALL, a restart without
// persistence) the release of a hold made before ends nothing, so the holds made since are
// kept and the sum never goes negative. Before the holds were kept by reservation, each
// release took its tokens off the sum: a second release, or one after Redis lost the data,
// ended other calls' holds.
func TestHoldEndsOnce(t *testing.T) {
	srv := startRedis(t)
	admin := srv.client()
	spec := limitstore.Spec{Tokens: limitstore.Rate{PerSecond: 1000, Burst: 10000}, BatchShare: 1}
	sa, sb := awayStore(srv, "once"), awayStore(srv, "once")
	a, b := sa.Open("key", spec), sb.Open("key", spec)
	held := func(want float64, when string) {
		t.Helper()
		if got := heldTokens(t, admin, "once", "key"); got != want {
			t.Fatalf("%s: %v held, want %v", when, got, want)
		}
	}

	ga, gb := hold(t, a, 50), hold(t, b, 30)
	held(80, "two holds")
	// The script that ends the first runs twice, as when a client resends a call whose
	// reply it lost, then the call ends twice through the store.
	release := []any{"", "0", "0", "0", "0", "0", "0", "0", "0", "1", "m", "0", "0", strconv.FormatInt(ga.Mark, 10) + ":50"}
	for range 2 {
		if err := redisstore.Scripts["adjust"].Run(ctx(t), admin, []string{"{once:key}:g", "{once:key}:hz"}, release...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	held(30, "the first's release run twice")
	end(t, a, ga, 50)
	end(t, a, ga, 50)
	held(30, "the first released twice more")

	if err := admin.FlushAll(ctx(t)).Err(); err != nil {
		t.Fatal(err)
	}
	ga = hold(t, a, 20)
	held(20, "a hold after FLUSHALL")
	end(t, b, gb, 30) // made before the flush
	held(20, "a hold made before FLUSHALL released")
	end(t, a, ga, 20)
	held(0, "every hold ended")

	ga = hold(t, a, 40)
	srv.stop()
	srv.start() // empty: no persistence
	waitBack(t, sa)
	waitBack(t, sb)
	gb = hold(t, b, 25)
	end(t, a, ga, 40) // made before the restart
	held(25, "a hold made before the restart released")
	end(t, b, gb, 25)
	held(0, "every hold ended after the restart")
}

// TestFailOpenHoldEndsWhereItWasMade: a hold that the FailOpen fallback made while Redis
// was away ends in the fallback when the call ends after Redis came back, and leaves the
// holds in Redis alone. Before, its release went to Redis and ended other replicas' holds
// there, while the fallback kept it held for ever (its bucket never refilled again).
func TestFailOpenHoldEndsWhereItWasMade(t *testing.T) {
	srv := startRedis(t)
	admin := srv.client()
	s := awayStore(srv, "away")
	other := srv.store(redisstore.WithPrefix("away")).Open("key", holdSpec)
	st := s.Open("key", holdSpec)

	srv.stop()
	g := hold(t, st, 60)
	if g.Mark >= 1<<50 {
		t.Fatalf("a hold made while Redis is away has mark %d, not the fallback's", g.Mark)
	}
	srv.start()
	waitBack(t, s)
	// The fallback's bucket keeps what the hold charged, and gets no refill while the
	// level and the hold fill it.
	if tok := redisstore.LocalTokens(st); tok != 40 {
		t.Fatalf("the fallback's bucket holds %v during the call, want 40", tok)
	}
	gOther := hold(t, other, 30)
	end(t, st, g, 60)
	if got := heldTokens(t, admin, "away", "key"); got != 30 {
		t.Fatalf("Redis holds %v after the fallback's hold ended, want the other replica's 30", got)
	}
	time.Sleep(time.Millisecond) // 0.01 tokens of refill, once nothing is held
	if tok := redisstore.LocalTokens(st); !(tok > 40) {
		t.Fatalf("the fallback's bucket holds %v after the call, no refill: the hold did not end there", tok)
	}
	end(t, other, gOther, 30)
	if got := heldTokens(t, admin, "away", "key"); got != 0 {
		t.Fatalf("Redis holds %v once every hold ended", got)
	}
}

// TestHoldsRenewedOnlyWhileHeld: the store renews the holds it has not ended, those Redis
// lost too (it makes them again: TestHoldRemadeAfterRedisLostIt), and stops once they
// end, so that no scope stays in the background work for ever. (The leases themselves
// are TestLiveReplicasHoldOutlastsTheLease's.)
func TestHoldsRenewedOnlyWhileHeld(t *testing.T) {
	srv := startRedis(t)
	synctest.Test(t, func(t *testing.T) {
		s, rdb := virtualReplica(t, srv, "renew")
		defer rdb.Close()
		defer s.Close()
		admin := redis.NewClient(&redis.Options{Addr: srv.addr(), ContextTimeoutEnabled: true})
		defer admin.Close()
		st, gone := s.Open("key", holdSpec), s.Open("gone", holdSpec)
		g := hold(t, st, 10)
		gg := hold(t, gone, 20)
		// Redis loses the second scope's holds (their keys evicted, say): the next renewal
		// makes them again and goes on renewing them while the call holds them.
		if err := admin.Del(context.Background(), "{renew:gone}:hz").Err(); err != nil {
			t.Fatal(err)
		}
		// Off the renewals' ticks: a hold that ends while a renewal is on its way may be made
		// again for as long as that renewal takes (TestEndedDuringRenewalStaysEnded).
		time.Sleep(holdLease + 100*time.Millisecond)
		if n, m := redisstore.Holds(s, "key"), redisstore.Holds(s, "gone"); n != 1 || m != 1 {
			t.Fatalf("%d and %d holds renewed, want 1 and 1", n, m)
		}
		end(t, st, g, 10)
		end(t, gone, gg, 20)
		if n, m := redisstore.Holds(s, "key"), redisstore.Holds(s, "gone"); n != 0 || m != 0 {
			t.Fatalf("%d and %d holds renewed after the last ones ended", n, m)
		}
		if n := heldTokens(t, admin, "renew", "gone"); n != 0 {
			t.Fatalf("%v tokens held once the holds ended", n)
		}
	})
}
