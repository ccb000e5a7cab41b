package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/redisstore"
)

// spend reserves amount in l and settles it whole.
func spend(t *testing.T, l limitstore.Ledger, p limitstore.BudgetPeriod, amount int64) {
	t.Helper()
	r, err := l.Reserve(ctx(t), "", p, amount, false)
	if err != nil || !r.OK {
		t.Fatalf("Reserve(%d): %+v, %v", amount, r, err)
	}
	if _, err := l.Settle(ctx(t), "", p, p.Slice, amount, amount); err != nil {
		t.Fatal(err)
	}
}

// read returns the window's totals as l sees them.
func read(t *testing.T, l limitstore.Ledger, p limitstore.BudgetPeriod) limitstore.BudgetResult {
	t.Helper()
	r, err := l.Reserve(ctx(t), "", p, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestBudgetSurvivesLostRedisState: two replicas spent 90 of a cap of 100; then Redis
// loses the budget's hash — restarted empty (no persistence, as a failover to an empty
// replica), flushed, or the key evicted — or rolls it back (restarted from a snapshot
// taken after the first 60, as a failover to a replica that lagged). The replicas detect
// it at their next call and restore what they know before admitting: the window reads 90
// again, and together they spend only the 10 left. A lost Redis used to read 0 (or 60)
// and let them spend the whole cap again.
func TestBudgetSurvivesLostRedisState(t *testing.T) {
	for _, how := range []string{"restart", "flushall", "evicted", "snapshot"} {
		t.Run(how, func(t *testing.T) {
			srv := startRedis(t)
			spec := limitstore.BudgetSpec{Cap: 100, Soft: []int64{50, 95}}
			p := limitstore.BudgetPeriod{Slice: 1000, Oldest: 1000, Epoch: 1000, TTL: time.Hour}
			a := srv.store(redisstore.WithPrefix("lost")).OpenBudget("b", spec)
			b := srv.store(redisstore.WithPrefix("lost")).OpenBudget("b", spec)
			spend(t, a, p, 60)
			if how == "snapshot" {
				if err := srv.client().Save(ctx(t)).Err(); err != nil {
					t.Fatal(err)
				}
			}
			spend(t, b, p, 30)
			if r := read(t, a, p); r.Spent != 90 {
				t.Fatalf("before the loss: %+v", r)
			}
			switch how {
			case "restart", "snapshot":
				srv.stop()
				srv.start()
			case "flushall":
				if err := srv.client().FlushAll(ctx(t)).Err(); err != nil {
					t.Fatal(err)
				}
			case "evicted":
				if err := srv.client().Del(ctx(t), "{lost:budget:1:b}:").Err(); err != nil {
					t.Fatal(err)
				}
			}
			// b first: it knows its own 30 and the 90 it last read.
			if r, err := b.Reserve(ctx(t), "", p, 20, false); err != nil || r.OK || r.Spent < 90 {
				t.Fatalf("after the loss, a reservation beyond what was left: %+v, %v", r, err)
			}
			if r := read(t, a, p); r.Spent != 90 {
				t.Fatalf("after the loss and both replicas' next call, the window reads %+v; want 90 spent", r)
			}
			var took int64
			var fired uint32
			for _, l := range []limitstore.Ledger{a, b, a, b} {
				if r, err := l.Reserve(ctx(t), "", p, 5, false); err != nil {
					t.Fatal(err)
				} else if r.OK {
					took += 5
					r, err := l.Settle(ctx(t), "", p, p.Slice, 5, 5)
					if err != nil {
						t.Fatal(err)
					}
					fired |= r.Fired
				}
			}
			if fired != 0b10 {
				t.Fatalf("soft thresholds fired after the loss: %b; want only the second (95), the first fired before", fired)
			}
			if took != 10 {
				t.Fatalf("the replicas spent %d after the loss; want the 10 left", took)
			}
			// A third replica that starts now sees the restored spend too.
			c := srv.store(redisstore.WithPrefix("lost")).OpenBudget("b", spec)
			if r := read(t, c, p); r.Spent != 100 || r.Reserved != 0 {
				t.Fatalf("a new replica reads %+v; want 100 spent", r)
			}
		})
	}
}

// TestBudgetLostTwiceAndConcurrently: a hash lost twice while replicas call it at once
// is restored once per replica and loss: no spend counted twice, none lost, and the
// reservations lost with the hash are not given back from later ones.
func TestBudgetLostTwiceAndConcurrently(t *testing.T) {
	srv := startRedis(t)
	spec := limitstore.BudgetSpec{Cap: 1_000_000}
	p := limitstore.BudgetPeriod{Slice: 7, Oldest: 7, Epoch: 7, TTL: time.Hour}
	const replicas, calls = 3, 20
	ledgers := make([]limitstore.Ledger, replicas)
	for i := range ledgers {
		ledgers[i] = srv.store(redisstore.WithPrefix("twice")).OpenBudget("b", spec)
	}
	// A reservation in flight when the hash is lost: its settle gives nothing back from
	// the reservations of the new hash.
	held := ledgers[0]
	if r, err := held.Reserve(ctx(t), "", p, 1000, false); err != nil || !r.OK {
		t.Fatalf("%+v, %v", r, err)
	}
	round := func() {
		var wg sync.WaitGroup
		for _, l := range ledgers {
			for range 2 {
				wg.Go(func() {
					for range calls {
						if r, err := l.Reserve(context.Background(), "", p, 10, false); err != nil || !r.OK {
							t.Errorf("%+v, %v", r, err)
							return
						}
						if _, err := l.Settle(context.Background(), "", p, p.Slice, 10, 10); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
		}
		wg.Wait()
	}
	round()
	for range 2 {
		if err := srv.client().FlushAll(ctx(t)).Err(); err != nil {
			t.Fatal(err)
		}
		round()
	}
	if t.Failed() {
		return
	}
	if r, err := ledgers[1].Reserve(ctx(t), "", p, 500, false); err != nil || !r.OK || r.Reserved != 500 {
		t.Fatalf("a reservation in the restored hash: %+v, %v", r, err)
	}
	if _, err := held.Settle(ctx(t), "", p, p.Slice, 1000, 700); err != nil {
		t.Fatal(err)
	}
	want := int64(3*replicas*2*calls*10 + 700)
	for _, l := range ledgers {
		if r := read(t, l, p); r.Spent != want || r.Reserved != 500 {
			t.Fatalf("after two losses: %+v; want %d spent and the 500 still reserved", r, want)
		}
	}
}

// TestBudgetClientsSurviveRedisRestart: two Clients on one Redis spend a monthly budget
// to its cap; Redis restarts empty. Client.Budget still reads the spend, and neither
// Client makes another call. They used to read $0.00 and spend the cap again.
func TestBudgetClientsSurviveRedisRestart(t *testing.T) {
	srv := startRedis(t)
	m, err := pricing.NewModel(pricing.Spec{ID: "m", Price: pricing.Price{
		Input: pricing.PerMTok(pricing.Dollar), Output: pricing.PerMTok(pricing.Dollar)}})
	if err != nil {
		t.Fatal(err)
	}
	req := &llmclient.Request{Model: "m", MaxTokens: 100, Messages: []llmclient.Message{llmclient.UserMessage("hi")}}
	est, _ := m.Cost(pricing.Tokens{Input: llmclient.EstimatePromptTokens(nil, req), Output: 100}, time.Now())
	b := budget.Budget{Name: "monthly", Window: budget.Monthly(time.UTC), Cap: 10 * est}
	clients := make([]*llmclient.Client, 2)
	ups := make([]*fake.Provider, 2)
	for i := range clients {
		ups[i] = fake.New(fake.Reply("ok").Usage(llmclient.EstimatePromptTokens(nil, req), 100).Forever())
		clients[i], err = llmclient.New(
			llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: ups[i], Prices: map[string]*pricing.Model{"": m}}),
			llmclient.WithLimitStore(srv.store(redisstore.WithPrefix("monthly"))), llmclient.WithBudget(b))
		if err != nil {
			t.Fatal(err)
		}
	}
	calls := func() int {
		n := 0
		for range 20 {
			for _, c := range clients {
				if _, err := c.Complete(ctx(t), req); err == nil {
					n++
				} else if !errors.Is(err, budget.ErrExceeded) {
					t.Fatal(err)
				}
			}
		}
		return n
	}
	if n := calls(); n != 10 {
		t.Fatalf("%d calls within a cap of 10", n)
	}
	before, err := clients[0].Budget(ctx(t), "monthly", "")
	if err != nil || before.Spent != 10*est {
		t.Fatalf("before the restart: %+v, %v", before, err)
	}
	srv.stop()
	srv.start()
	for _, c := range clients {
		st, err := c.Budget(ctx(t), "monthly", "")
		if err != nil || st.Spent != before.Spent {
			t.Fatalf("after the restart a Client reads %v spent (%v); want %v", st.Spent, err, before.Spent)
		}
	}
	if n := calls(); n != 0 {
		t.Fatalf("%d more calls after Redis restarted; the cap was spent", n)
	}
}

// TestBudgetFailOpenShareOfWhatIsLeft: two replicas with WithLocalShare(0.5) have spent
// 90 of a cap of 100 when Redis freezes (SIGSTOP): under FailOpen each admits against
// half of the 10 left, not half of the cap; after the thaw Redis holds the spend from
// before the freeze and, once each replica has called again, what they spent locally
// (each once), and no reservation. They used to spend another whole cap while Redis was
// frozen, and their local spend never reached Redis.
func TestBudgetFailOpenShareOfWhatIsLeft(t *testing.T) {
	srv := startRedis(t)
	spec := limitstore.BudgetSpec{Cap: 100}
	p := limitstore.BudgetPeriod{Slice: 50, Oldest: 50, Epoch: 50, TTL: time.Hour}
	opts := []redisstore.Option{redisstore.WithPrefix("share"), redisstore.WithLocalShare(0.5),
		redisstore.WithTimeout(time.Second)}
	a := srv.store(opts...).OpenBudget("b", spec)
	b := srv.store(opts...).OpenBudget("b", spec)
	spend(t, a, p, 60)
	spend(t, b, p, 30)
	read(t, a, p) // each replica last read 90
	read(t, b, p)

	srv.freeze()
	var took int64
	for _, l := range []limitstore.Ledger{a, b} {
		for range 100 {
			r, err := l.Reserve(ctx(t), "", p, 1, false)
			if err != nil {
				t.Fatal(err)
			}
			if !r.OK {
				break
			}
			took++
			if _, err := l.Settle(ctx(t), "", p, p.Slice, 1, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	srv.thaw()
	if took > 10 {
		t.Fatalf("the replicas spent %d while Redis was frozen; 10 were left", took)
	}
	if took < 8 {
		t.Fatalf("the replicas spent %d while Redis was frozen; each may spend its half of the 10 left", took)
	}
	check := srv.store(redisstore.WithPrefix("share")).OpenBudget("b", spec)
	deadline := time.Now().Add(time.Minute)
	for {
		r, err := check.Reserve(ctx(t), "", p, 0, true)
		if err == nil && r.Spent == 90+took && r.Reserved == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the thaw: %+v, %v; want the 90 spent before the freeze and the %d spent during it, nothing held", r, err, took)
		}
		time.Sleep(50 * time.Millisecond) // the replicas' lost reserves are taken back on their next call
		read(t, a, p)
		read(t, b, p)
	}
}

// TestBudgetLostRollingWindow: in a rolling window each replica restores its own spend in
// the slices it was made in, and they leave the window with them; the total a replica
// last read counts in the slice it was read in, so it leaves the window with that slice:
// later than the spend it stands for, never earlier.
func TestBudgetLostRollingWindow(t *testing.T) {
	srv := startRedis(t)
	spec := limitstore.BudgetSpec{Cap: 1000}
	a := srv.store(redisstore.WithPrefix("rolling")).OpenBudget("b", spec)
	b := srv.store(redisstore.WithPrefix("rolling")).OpenBudget("b", spec)
	spend(t, a, rollingPeriod(100, 4), 10)
	spend(t, a, rollingPeriod(101, 4), 20)
	spend(t, b, rollingPeriod(101, 4), 5)
	read(t, a, rollingPeriod(101, 4))
	read(t, b, rollingPeriod(101, 4))
	if err := srv.client().FlushAll(ctx(t)).Err(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		slice, want int64
		why         string
	}{
		{102, 35, "every slice still in the window"},
		{104, 35, "slice 100 left, but the total read in slice 101 (35) is larger than the 25 restored in slices 101 on"},
		{105, 0, "slice 101 left, and the total read in it"},
	} {
		for _, l := range []limitstore.Ledger{a, b} {
			if r := read(t, l, rollingPeriod(tc.slice, 4)); r.Spent != tc.want {
				t.Fatalf("slice %d: %+v; want %d spent: %s", tc.slice, r, tc.want, tc.why)
			}
		}
	}
}

// TestBudgetSettleDuringFreezeCountsOnce: a Settle sent to a frozen Redis times out and
// is kept to be sent again, but the frozen server runs it when it wakes up: sent again,
// it must not count the spend a second time.
func TestBudgetSettleDuringFreezeCountsOnce(t *testing.T) {
	srv := startRedis(t)
	spec := limitstore.BudgetSpec{Cap: 1000}
	p := limitstore.BudgetPeriod{Slice: 3, Oldest: 3, Epoch: 3, TTL: time.Hour}
	s := awayStore(srv, "twice-settled")
	l := s.OpenBudget("b", spec)
	check := srv.store(redisstore.WithPrefix("twice-settled")).OpenBudget("b", spec)
	spend(t, l, p, 5) // connected, and the scripts loaded: what the frozen server receives, it runs
	if r, err := l.Reserve(ctx(t), "", p, 30, false); err != nil || !r.OK {
		t.Fatalf("%+v, %v", r, err)
	}
	srv.freeze()
	_, err := l.Settle(ctx(t), "", p, p.Slice, 30, 25) // times out: kept
	srv.thaw()
	if !errors.Is(err, redisstore.ErrUnavailable) {
		t.Fatalf("a settle while Redis does not answer: %v", err)
	}
	waitBack(t, s)
	if got := read(t, check, p); got.Spent != 30 {
		t.Skipf("the frozen server did not run the timed-out settle (%+v): nothing sent twice", got)
	}
	read(t, l, p) // the ledger's next call sends the kept settle again
	if got := read(t, check, p); got.Spent != 30 || got.Reserved != 0 {
		t.Fatalf("after the settle was sent again: %+v; want 5 + 25 spent, each once, nothing reserved", got)
	}
}
