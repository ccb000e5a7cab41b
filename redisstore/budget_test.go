package redisstore_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/redisstore"
)

// rollingPeriod is slice id of a rolling window of n slices.
func rollingPeriod(id, n int64) limitstore.BudgetPeriod {
	return limitstore.BudgetPeriod{Slice: id, Oldest: id - n + 1, Epoch: id / n, TTL: time.Hour}
}

// TestBudgetLedgerMatchesMemory runs the same random operations on a ledger in Redis and
// on the memory ledger, which the root module tests on its own: every answer must be the
// same. Amounts range from 1 to near math.MaxInt64, where a Lua double would lose
// digits, so the scripts' exact arithmetic and saturation are checked too.
func TestBudgetLedgerMatchesMemory(t *testing.T) {
	srv := startRedis(t)
	for _, tc := range []struct {
		name    string
		cap     int64
		soft    []int64
		amounts func(r *rand.Rand) int64
	}{
		{"small", 1000, []int64{500, 800}, func(r *rand.Rand) int64 { return r.Int64N(300) }},
		{"beyond 2^53", math.MaxInt64 / 3, []int64{math.MaxInt64 / 6, math.MaxInt64/3 - 7},
			func(r *rand.Rand) int64 { return math.MaxInt64/9 + r.Int64N(1<<40) }},
		{"at MaxInt64", math.MaxInt64, []int64{math.MaxInt64 - 1},
			func(r *rand.Rand) int64 { return math.MaxInt64 - r.Int64N(3) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := limitstore.BudgetSpec{Cap: tc.cap, Soft: tc.soft}
			red := srv.store(redisstore.WithPrefix("diff-"+strings.ReplaceAll(tc.name, " ", "-"))).OpenBudget("b", spec)
			mem := limitstore.NewLedger(spec)
			r := rand.New(rand.NewPCG(1, uint64(len(tc.name))))
			type hold struct {
				key           string
				slice, amount int64
			}
			var holds []hold
			slice := int64(100)
			for i := range 2000 {
				if r.IntN(10) == 0 {
					slice += r.Int64N(3) // time goes on, sometimes by whole windows
				}
				p := rollingPeriod(slice, 4)
				key := []string{"", "team-a", "{odd}key"}[r.IntN(3)]
				if len(holds) > 0 && r.IntN(2) == 0 {
					j := r.IntN(len(holds))
					h := holds[j]
					holds = append(holds[:j], holds[j+1:]...)
					spent := h.amount
					if r.IntN(2) == 0 {
						spent = tc.amounts(r)
					}
					got, err := red.Settle(ctx(t), h.key, p, h.slice, h.amount, spent)
					if err != nil {
						t.Fatal(err)
					}
					want, _ := mem.Settle(ctx(t), h.key, p, h.slice, h.amount, spent)
					if got != want {
						t.Fatalf("op %d: Settle(%q, slice %d of %d, %d, %d) = %+v in Redis, %+v in memory",
							i, h.key, h.slice, slice, h.amount, spent, got, want)
					}
					continue
				}
				amount, over := tc.amounts(r), r.IntN(8) == 0
				got, err := red.Reserve(ctx(t), key, p, amount, over)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := mem.Reserve(ctx(t), key, p, amount, over)
				if got != want {
					t.Fatalf("op %d: Reserve(%q, slice %d, %d, over %v) = %+v in Redis, %+v in memory", i, key, slice, amount, over, got, want)
				}
				if got.OK {
					holds = append(holds, hold{key, slice, amount})
				}
			}
		})
	}
}

// TestBudgetLedgerBadFields: fields damaged by hand count as zero and heal on the next
// write; the key expires with its window.
func TestBudgetLedgerBadFields(t *testing.T) {
	srv := startRedis(t)
	st := srv.store(redisstore.WithPrefix("bad"))
	l := st.OpenBudget("b", limitstore.BudgetSpec{Cap: 100})
	p := limitstore.BudgetPeriod{Slice: 7, Oldest: 7, Epoch: 7, TTL: time.Second}
	if r, err := l.Reserve(ctx(t), "", p, 60, false); err != nil || !r.OK {
		t.Fatalf("%+v, %v", r, err)
	}
	rdb := srv.client()
	key := "{bad:budget:1:b}:" // the hash of the empty key (OpenBudget's layout)
	if err := rdb.HSet(ctx(t), key, "r7", "garbage", "s7", "-5", "e", "x").Err(); err != nil {
		t.Fatal(err)
	}
	r, err := l.Reserve(ctx(t), "", p, 100, false)
	if err != nil || !r.OK || r.Spent != 0 || r.Reserved != 100 {
		t.Fatalf("after damage: %+v, %v; want the bad fields read as 0", r, err)
	}
	ttl, err := rdb.PTTL(ctx(t), key).Result()
	if err != nil || ttl <= 0 || ttl > time.Second+3*time.Second {
		t.Fatalf("PTTL %v, %v: the hash expires with its window, plus a margin", ttl, err)
	}
}

// TestBudgetReplicasShareTheCap: four replicas, each a Client with its own Store and
// connection on one redis-server, loop on calls until their shared budget refuses them.
// Each call costs more than it reserved (its prompt is twice the estimate), the worst
// case: together they overspend the cap by at most one call's overrun each, use it up,
// and the soft threshold fires once across them. Nothing here depends on timing.
func TestBudgetReplicasShareTheCap(t *testing.T) {
	srv := startRedis(t)
	m, err := pricing.NewModel(pricing.Spec{ID: "m", Price: pricing.Price{
		Input: pricing.PerMTok(pricing.Dollar), Output: pricing.PerMTok(4 * pricing.Dollar)}})
	if err != nil {
		t.Fatal(err)
	}
	req := func() *llmclient.Request {
		return &llmclient.Request{Model: "m", MaxTokens: 250, Messages: []llmclient.Message{llmclient.UserMessage("how much is this?")}}
	}
	prompt := llmclient.EstimatePromptTokens(nil, req())
	reserved, _ := m.Cost(pricing.Tokens{Input: prompt, Output: 250}, time.Now())
	actual, _ := m.Cost(pricing.Tokens{Input: 2 * prompt, Output: 250}, time.Now())
	overrun := actual - reserved
	const replicas, capCalls = 4, 150
	limit := pricing.Money(capCalls) * reserved
	b := budget.Budget{Name: "shared", Cap: limit, Soft: []float64{0.5}}

	var mu sync.Mutex
	var total pricing.Money
	soft, hard := 0, 0
	obs := func(_ context.Context, e llmclient.Event) {
		if e.Kind != event.Budget {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if e.Budget.Hard {
			hard++
		} else {
			soft++
		}
	}
	clients := make([]*llmclient.Client, replicas)
	for i := range clients {
		c, err := llmclient.New(
			llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Reply("ok").Usage(2*prompt, 250).Forever()),
				Prices: map[string]*pricing.Model{"": m}}),
			llmclient.WithLimitStore(srv.store(redisstore.WithPrefix("replicas"))),
			llmclient.WithBudget(b), llmclient.WithObserver(obs))
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = c
	}
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			for range 10 * capCalls { // a budget that never refuses fails, rather than hangs
				resp, err := c.Complete(ctx(t), req())
				if err != nil {
					if !errors.Is(err, budget.ErrExceeded) {
						t.Error(err)
					}
					return
				}
				mu.Lock()
				total += resp.Cost.Amount
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	st, err := clients[0].Budget(ctx(t), "shared", "")
	if err != nil {
		t.Fatal(err)
	}
	if st.Spent != total || st.Reserved != 0 {
		t.Fatalf("Redis counted %v spent and %v reserved; the calls cost %v", st.Spent, st.Reserved, total)
	}
	if bound := limit + replicas*overrun; total > bound {
		t.Fatalf("spent %v, more than the cap %v plus one overrun (%v) per replica", total, limit, overrun)
	}
	if total < limit-actual {
		t.Fatalf("spent %v: the cap %v was not used up", total, limit)
	}
	if soft != 1 || hard != 1 {
		t.Fatalf("%d soft and %d hard events across the replicas, want one of each", soft, hard)
	}
}

// TestBudgetRedisAway: while Redis cannot be reached, FailClosed refuses with
// ErrUnavailable; FailOpen admits against the local share of what was left of the cap,
// and settles that could not reach Redis, local ones included, are sent when it answers
// again.
func TestBudgetRedisAway(t *testing.T) {
	srv := startRedis(t)
	spec := limitstore.BudgetSpec{Cap: 100}
	p := limitstore.BudgetPeriod{Slice: 1, Oldest: 1, Epoch: 1, TTL: time.Hour}

	closed := srv.store(redisstore.WithPrefix("away"), redisstore.WithFailMode(redisstore.FailClosed),
		redisstore.WithTimeout(200*time.Millisecond)).OpenBudget("b", spec)
	open := srv.store(redisstore.WithPrefix("away"), redisstore.WithLocalShare(0.5),
		redisstore.WithTimeout(200*time.Millisecond)).OpenBudget("b", spec)
	check := srv.store(redisstore.WithPrefix("away")).OpenBudget("b", spec)
	huge := srv.store(redisstore.WithPrefix("away"), redisstore.WithTimeout(200*time.Millisecond)).
		OpenBudget("huge", limitstore.BudgetSpec{Cap: math.MaxInt64})

	// A reservation taken in Redis, settled while it is away.
	if r, err := open.Reserve(ctx(t), "", p, 30, false); err != nil || !r.OK {
		t.Fatalf("%+v, %v", r, err)
	}
	srv.stop()
	if _, err := closed.Reserve(ctx(t), "", p, 10, false); !errors.Is(err, redisstore.ErrUnavailable) {
		t.Fatalf("FailClosed while Redis is away: %v", err)
	}
	if _, err := open.Settle(ctx(t), "", p, 1, 30, 25); !errors.Is(err, redisstore.ErrUnavailable) {
		t.Fatalf("a settle in Redis while it is away: %v", err)
	}
	// FailOpen: the local ledger holds half of what was left of the cap when Redis last
	// answered (100 - 30 held).
	if r, err := open.Reserve(ctx(t), "", p, 35, false); err != nil || !r.OK {
		t.Fatalf("FailOpen within the local share: %+v, %v", r, err)
	}
	if r, err := open.Reserve(ctx(t), "", p, 1, false); err != nil || r.OK {
		t.Fatalf("FailOpen beyond the local share: %+v, %v", r, err)
	}
	if r, err := open.Settle(ctx(t), "", p, 1, 35, 30); err != nil || r.Spent != 30 || r.Reserved != 0 {
		t.Fatalf("a local settle: %+v, %v; want the spend last read from Redis (0) and the local spend", r, err)
	}
	// The local share of a cap of MaxInt64 is the whole of it, not an overflow.
	if r, err := huge.Reserve(ctx(t), "", p, math.MaxInt64, false); err != nil || !r.OK {
		t.Fatalf("FailOpen with a cap of MaxInt64: %+v, %v", r, err)
	}

	srv.start()
	// The queued settle reaches Redis before the next call, and so does the spend settled
	// locally while Redis was away.
	deadline := time.Now().Add(time.Minute)
	for {
		r, err := open.Reserve(ctx(t), "", p, 0, true)
		if err == nil && r.Spent == 55 && r.Reserved == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Redis came back: %+v, %v; want the queued settles (25 + 30 spent, nothing reserved)", r, err)
		}
		time.Sleep(50 * time.Millisecond) // the store probes Redis again on its own interval
	}
	if r, err := check.Reserve(ctx(t), "", p, 0, true); err != nil || r.Spent != 55 {
		t.Fatalf("another replica sees %+v, %v", r, err)
	}
}
