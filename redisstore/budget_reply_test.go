package redisstore_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/redisstore"
)

// TestUnexpectedBudgetReplies: a budget script answered with something else than it
// returns (here a 16 MB string) is a Redis failure, as for the limiter's scripts: under
// FailOpen Reserve admits against the local ledger, and its Settle is counted there;
// under FailClosed Reserve refuses with ErrUnavailable, and the error stays small. The
// ledger used to return the error under FailOpen too, so a Client refused the attempt.
func TestUnexpectedBudgetReplies(t *testing.T) {
	big := strings.Repeat("x", 16<<20)
	fake := startFakeRedis(t, "$"+strconv.Itoa(len(big))+"\r\n"+big+"\r\n")
	p := limitstore.BudgetPeriod{Slice: 7, Oldest: 7, Epoch: 7, TTL: time.Minute}
	for _, mode := range []redisstore.FailMode{redisstore.FailOpen, redisstore.FailClosed} {
		t.Run(mode.String(), func(t *testing.T) {
			s := fake.store(t, mode)
			l := s.OpenBudget("b", limitstore.BudgetSpec{Cap: 100, Soft: []int64{50}})
			res, err := l.Reserve(ctx(t), "", p, 60, false)
			if s.Healthy() {
				t.Error("the store took an unusable reply for a healthy Redis")
			}
			switch mode {
			case redisstore.FailOpen:
				if err != nil || !res.OK || res.Reserved != 60 {
					t.Fatalf("FailOpen Reserve: %+v, %.200v; want a local reservation of 60", res, err)
				}
				// The local ledger holds it: a second one does not fit under the cap.
				if res, err := l.Reserve(ctx(t), "", p, 60, false); err != nil || res.OK {
					t.Fatalf("FailOpen second Reserve: %+v, %.200v; want the local cap to refuse it", res, err)
				}
				res, err := l.Settle(ctx(t), "", p, p.Slice, 60, 55)
				if err != nil || res.Spent != 55 || res.Reserved != 0 || res.Fired != 1 {
					t.Fatalf("FailOpen Settle: %+v, %.200v; want it counted locally", res, err)
				}
			case redisstore.FailClosed:
				if !errors.Is(err, redisstore.ErrUnavailable) || res.OK {
					t.Fatalf("FailClosed Reserve: %+v, %.200v; want ErrUnavailable", res, err)
				}
				if n := len(err.Error()); n > 200 {
					t.Fatalf("the error holds %d bytes of what the server sent", n)
				}
			}
		})
	}
}

// TestBudgetSettleGoesWhereReserved: once Redis is back, a Settle of a reservation taken
// in Redis ends it there, even while a larger reservation taken in the local ledger during
// the outage is still in flight in the same slice. The ledger used to send every Settle
// whose amount the local reservations could cover to the local ledger: the Redis
// reservation stayed held in Redis (for a calendar window, until the window's end), and
// the local ledger lost track of the reservation still in flight.
func TestBudgetSettleGoesWhereReserved(t *testing.T) {
	srv := startRedis(t)
	s := awayStore(srv, "where")
	l := s.OpenBudget("b", limitstore.BudgetSpec{Cap: 1000})
	check := srv.store(redisstore.WithPrefix("where")).OpenBudget("b", limitstore.BudgetSpec{Cap: 1000})
	p := limitstore.BudgetPeriod{Slice: 1, Oldest: 1, Epoch: 1, TTL: time.Hour}

	srv.stop()
	if r, err := l.Reserve(ctx(t), "", p, 100, false); err != nil || !r.OK {
		t.Fatalf("a local reservation while Redis is away: %+v, %v", r, err)
	}
	srv.start()
	waitBack(t, s)
	if r, err := l.Reserve(ctx(t), "", p, 30, false); err != nil || !r.OK || r.Reserved != 30 {
		t.Fatalf("a reservation in Redis: %+v, %v", r, err)
	}
	if _, err := l.Settle(ctx(t), "", p, p.Slice, 30, 20); err != nil {
		t.Fatal(err)
	}
	if r, err := check.Reserve(ctx(t), "", p, 0, true); err != nil || r.Reserved != 0 || r.Spent != 20 {
		t.Fatalf("Redis after the settle of its only reservation: %+v, %v; want 20 spent, nothing reserved", r, err)
	}
	if _, err := l.Settle(ctx(t), "", p, p.Slice, 100, 90); err != nil {
		t.Fatal(err)
	}
	if r, err := check.Reserve(ctx(t), "", p, 0, true); err != nil || r.Reserved != 0 || r.Spent != 110 {
		t.Fatalf("Redis after the local settle: %+v, %v; want 110 spent, nothing reserved", r, err)
	}
}

// awayStore returns a Store for tests of Redis going away and coming back: a timeout of
// a second, long beside a healthy call even on a loaded machine, and a probe every 10ms.
func awayStore(srv *redisServer, prefix string) *redisstore.Store {
	return srv.store(redisstore.WithPrefix(prefix), redisstore.WithTimeout(time.Second),
		redisstore.WithProbeInterval(10*time.Millisecond))
}

// waitBack waits until s uses Redis again, probing it through a scope's state.
func waitBack(t *testing.T, s *redisstore.Store) {
	t.Helper()
	probe := s.Open("probe", limitstore.Spec{})
	for deadline := time.Now().Add(time.Minute); ; {
		if _, err := probe.Blocked(ctx(t)); err == nil && s.Healthy() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the store does not use Redis again")
		}
		time.Sleep(20 * time.Millisecond) // the probe interval, in real time: a real server
	}
}

// TestBudgetHugeTTL: a period whose TTL is near the largest Duration still gives the
// budget's hash an expiry (saturated), instead of overflowing with the store's margin
// into a negative one, which left the hash without any.
func TestBudgetHugeTTL(t *testing.T) {
	srv := startRedis(t)
	l := srv.store(redisstore.WithPrefix("ttl")).OpenBudget("b", limitstore.BudgetSpec{Cap: 100})
	p := limitstore.BudgetPeriod{Slice: 1, Oldest: 1, Epoch: 1, TTL: math.MaxInt64}
	if r, err := l.Reserve(ctx(t), "", p, 10, false); err != nil || !r.OK {
		t.Fatalf("%+v, %v", r, err)
	}
	ttl, err := srv.client().PTTL(ctx(t), "{ttl:budget:1:b}:").Result()
	if err != nil || ttl <= 0 {
		t.Fatalf("PTTL %v, %v: want an expiry", ttl, err)
	}
}

// TestBudgetLocalSettleReportsSharedThresholds: once Redis is back, the Settle of a
// reservation taken locally during an outage counts its spend in Redis too; a soft
// threshold that spend makes the shared window reach is reported then. The ledger used to
// report only the local ledger's thresholds, so a threshold the shared spend crossed this
// way was marked reached in Redis and reported by no replica.
func TestBudgetLocalSettleReportsSharedThresholds(t *testing.T) {
	srv := startRedis(t)
	spec := limitstore.BudgetSpec{Cap: 100, Soft: []int64{50}}
	p := limitstore.BudgetPeriod{Slice: 1, Oldest: 1, Epoch: 1, TTL: time.Hour}
	s := awayStore(srv, "soft")
	a := s.OpenBudget("b", spec)
	b := srv.store(redisstore.WithPrefix("soft")).OpenBudget("b", spec)

	if r, err := b.Reserve(ctx(t), "", p, 45, false); err != nil || !r.OK {
		t.Fatalf("another replica's reservation: %+v, %v", r, err)
	}
	if r, err := b.Settle(ctx(t), "", p, p.Slice, 45, 45); err != nil || r.Fired != 0 {
		t.Fatalf("another replica's settle: %+v, %v", r, err)
	}
	srv.freeze() // Redis stops answering, its data kept
	r, err := a.Reserve(ctx(t), "", p, 10, false)
	srv.thaw()
	if err != nil || !r.OK || s.Healthy() {
		t.Fatalf("a reservation while Redis does not answer: %+v, %v (healthy %v); want a local one", r, err, s.Healthy())
	}
	waitBack(t, s)
	res, err := a.Settle(ctx(t), "", p, p.Slice, 10, 10)
	if err != nil || res.Spent < 55 || res.Fired != 1 {
		t.Fatalf("the local reservation's settle: %+v, %v; want the shared spend (55) and its threshold reported", res, err)
	}
}

// TestBudgetLocalSoftThresholdsFollowTheShare: the FailOpen ledger's soft thresholds are
// the budget's times WithLocalShare, like its cap, so that an outage still warns before
// the local cap refuses. They were the budget's own, above the local cap: never reached.
func TestBudgetLocalSoftThresholdsFollowTheShare(t *testing.T) {
	srv := startRedis(t)
	l := srv.store(redisstore.WithPrefix("share"), redisstore.WithTimeout(200*time.Millisecond),
		redisstore.WithLocalShare(0.25)).OpenBudget("b", limitstore.BudgetSpec{Cap: 100, Soft: []int64{80}})
	p := limitstore.BudgetPeriod{Slice: 1, Oldest: 1, Epoch: 1, TTL: time.Hour}
	srv.stop()
	if r, err := l.Reserve(ctx(t), "", p, 25, false); err != nil || !r.OK {
		t.Fatalf("a local reservation of the whole local cap: %+v, %v", r, err)
	}
	if r, err := l.Reserve(ctx(t), "", p, 1, false); err != nil || r.OK {
		t.Fatalf("beyond the local cap: %+v, %v; want refused", r, err)
	}
	if r, err := l.Settle(ctx(t), "", p, p.Slice, 25, 21); err != nil || r.Fired != 1 {
		t.Fatalf("a local settle past 80%% of the local cap: %+v, %v; want the threshold reported", r, err)
	}
}

// TestBudgetTimedOutReserveIsTakenBack: a Reserve that Redis does not answer in time may
// still run there (a frozen server runs it when it wakes up), leaving a reservation that
// nobody settles, held until the window ends (for a daily budget, all day). The ledger
// takes such a reservation back once Redis answers again, and only if it was taken.
func TestBudgetTimedOutReserveIsTakenBack(t *testing.T) {
	srv := startRedis(t)
	spec := limitstore.BudgetSpec{Cap: 100}
	p := limitstore.BudgetPeriod{Slice: 1, Oldest: 1, Epoch: 1, TTL: time.Hour}
	s := awayStore(srv, "phantom")
	l := s.OpenBudget("b", spec)
	check := srv.store(redisstore.WithPrefix("phantom")).OpenBudget("b", spec)
	// Connected, and the script loaded: what the frozen server receives, it runs.
	if r, err := l.Reserve(ctx(t), "", p, 5, false); err != nil || !r.OK {
		t.Fatalf("%+v, %v", r, err)
	}
	if _, err := l.Settle(ctx(t), "", p, p.Slice, 5, 5); err != nil {
		t.Fatal(err)
	}
	srv.freeze()
	r, err := l.Reserve(ctx(t), "", p, 30, false) // times out: admitted locally
	srv.thaw()
	if err != nil || !r.OK {
		t.Fatalf("a reservation while Redis does not answer: %+v, %v; want a local one", r, err)
	}
	waitBack(t, s)
	if got, err := check.Reserve(ctx(t), "", p, 0, true); err != nil || got.Reserved != 30 {
		t.Skipf("the frozen server did not run the timed-out reservation (%+v, %v): nothing to take back", got, err)
	}
	if _, err := l.Reserve(ctx(t), "", p, 0, true); err != nil { // the ledger's next call
		t.Fatal(err)
	}
	if got, err := check.Reserve(ctx(t), "", p, 0, true); err != nil || got.Reserved != 0 || got.Spent != 5 {
		t.Fatalf("Redis after the ledger's next call: %+v, %v; want the phantom reservation taken back", got, err)
	}
	if res, err := l.Settle(ctx(t), "", p, p.Slice, 30, 25); err != nil || res.Spent != 30 {
		t.Fatalf("the local reservation's settle: %+v, %v; want the shared spend", res, err)
	}
	if got, err := check.Reserve(ctx(t), "", p, 0, true); err != nil || got.Reserved != 0 || got.Spent != 30 {
		t.Fatalf("Redis at the end: %+v, %v; want 30 spent, nothing reserved", got, err)
	}
	// Nothing is in flight: no reservation's token is left (only the mark of the local
	// spend counted, ":<token>"), and the budget's own hash holds only its slices and
	// flags.
	rdb := srv.client()
	toks, err := rdb.HKeys(ctx(t), "{phantom:budget:1:b}q:").Result()
	if err != nil || len(toks) != 1 || !strings.HasPrefix(toks[0], ":") {
		t.Fatalf("tokens left: %q, %v; want the local spend's mark only", toks, err)
	}
	fields, err := rdb.HKeys(ctx(t), "{phantom:budget:1:b}:").Result()
	if err != nil || len(fields) != 7 {
		t.Fatalf("the budget's hash holds %v, %v; want s1, r1, e, f, h, i and v (its incarnation and count of writes)", fields, err)
	}
}

// TestBudgetSpendOnlySettleCountsLocally: a call that ends in a later slice than it
// reserved in settles its spend alone (reserved 0) in that slice. While Redis is away
// under FailOpen, that spend is charged to the local ledger, so the local reservations
// that follow in the outage count it, and it reaches Redis once, when Redis answers
// again. It used to wait for Redis only: the local ledger let the replica spend the cap
// again on top of it.
func TestBudgetSpendOnlySettleCountsLocally(t *testing.T) {
	srv := startRedis(t)
	s := awayStore(srv, "spendonly")
	l := s.OpenBudget("b", limitstore.BudgetSpec{Cap: 100})
	check := srv.store(redisstore.WithPrefix("spendonly")).OpenBudget("b", limitstore.BudgetSpec{Cap: 100})
	p := limitstore.BudgetPeriod{Slice: 2, Oldest: 1, Epoch: 1, TTL: time.Hour}

	srv.stop()
	r, err := l.Settle(ctx(t), "", p, p.Slice, 0, 80)
	if err != nil || r.Spent != 80 {
		t.Fatalf("a spend-only settle while Redis is away: %+v, %v; want 80 spent locally and no error (FailOpen)", r, err)
	}
	if r, err := l.Reserve(ctx(t), "", p, 50, false); err != nil || r.OK {
		t.Fatalf("a local reservation past the cap after the spend: %+v, %v; want refused", r, err)
	}
	if r, err := l.Reserve(ctx(t), "", p, 20, false); err != nil || !r.OK {
		t.Fatalf("a local reservation within what is left: %+v, %v; want admitted", r, err)
	}
	srv.start()
	waitBack(t, s)
	if _, err := l.Reserve(ctx(t), "", p, 0, true); err != nil { // sends the queued settle
		t.Fatal(err)
	}
	if r, err := check.Reserve(ctx(t), "", p, 0, true); err != nil || r.Spent != 80 {
		t.Fatalf("Redis after the outage: %+v, %v; want the spend counted once (80)", r, err)
	}
}

// TestBudgetQueuedSettlesDrainOverTheNextCalls: after an outage, the settles queued while
// Redis was away are sent again a few at a time by the ledger's next calls, not all by
// the first (which would wait out thousands of round trips); Flush sends the rest. Each
// is counted once.
func TestBudgetQueuedSettlesDrainOverTheNextCalls(t *testing.T) {
	srv := startRedis(t)
	s := awayStore(srv, "drain")
	spec := limitstore.BudgetSpec{Cap: 1_000_000}
	l := s.OpenBudget("b", spec)
	check := srv.store(redisstore.WithPrefix("drain")).OpenBudget("b", spec)
	p := limitstore.BudgetPeriod{Slice: 1, Oldest: 1, Epoch: 1, TTL: time.Hour}
	const n = 100
	for range n {
		if r, err := l.Reserve(ctx(t), "", p, 2, false); err != nil || !r.OK {
			t.Fatalf("%+v, %v", r, err)
		}
	}
	srv.stop()
	for range n {
		_, _ = l.Settle(ctx(t), "", p, p.Slice, 2, 1)
	}
	if got := redisstore.PendingSettles(l); got != n {
		t.Fatalf("%d settles queued while Redis is away, want %d", got, n)
	}
	srv.start()
	waitBack(t, s)
	read(t, l, p)
	if got := redisstore.PendingSettles(l); got != n-32 {
		t.Fatalf("%d settles still queued after one call, want %d: a call sends 32", got, n-32)
	}
	if err := l.(interface{ Flush(context.Context) error }).Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if got := redisstore.PendingSettles(l); got != 0 {
		t.Fatalf("%d settles still queued after Flush", got)
	}
	if r := read(t, check, p); r.Spent != n || r.Reserved != 0 {
		t.Fatalf("Redis after the queue drained: %+v; want %d spent, nothing reserved", r, n)
	}
}
