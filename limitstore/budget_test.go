package limitstore_test

import (
	"context"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/llmclient/llmclient/limitstore"
)

var ctx = context.Background()

// day is a calendar period: one slice.
func day(id int64) limitstore.BudgetPeriod {
	return limitstore.BudgetPeriod{Slice: id, Oldest: id, Epoch: id, TTL: time.Hour}
}

// rolling is slice id of a rolling window of n slices.
func rolling(id, n int64) limitstore.BudgetPeriod {
	return limitstore.BudgetPeriod{Slice: id, Oldest: id - n + 1, Epoch: id / n, TTL: time.Hour}
}

func mustReserve(t *testing.T, l limitstore.Ledger, key string, p limitstore.BudgetPeriod, amount int64) limitstore.BudgetResult {
	t.Helper()
	r, err := l.Reserve(ctx, key, p, amount, false)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustSettle(t *testing.T, l limitstore.Ledger, key string, p limitstore.BudgetPeriod, slice, reserved, spent int64) limitstore.BudgetResult {
	t.Helper()
	r, err := l.Settle(ctx, key, p, slice, reserved, spent)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestLedgerReserveAndSettle(t *testing.T) {
	l := limitstore.NewLedger(limitstore.BudgetSpec{Cap: 100, Soft: []int64{50, 80}})
	p := day(10)
	if r := mustReserve(t, l, "", p, 60); !r.OK || r.Reserved != 60 || r.Spent != 0 {
		t.Fatalf("first reservation: %+v", r)
	}
	if r := mustReserve(t, l, "", p, 41); r.OK || r.Never || r.FreeAfter != 10 || !r.FiredHard {
		t.Fatalf("41 on top of 60 under a cap of 100: %+v, want a refusal until slice 10 leaves, hard fired", r)
	}
	if r := mustReserve(t, l, "", p, 40); !r.OK || r.Reserved != 100 {
		t.Fatalf("40 on top of 60 fits exactly: %+v", r)
	}
	if r := mustReserve(t, l, "", p, 1); r.OK || r.FiredHard {
		t.Fatalf("a second refusal in the epoch fires nothing: %+v", r)
	}
	// The 60 cost 55: reaching the first soft threshold.
	if r := mustSettle(t, l, "", p, 10, 60, 55); r.Spent != 55 || r.Reserved != 40 || r.Fired != 1 {
		t.Fatalf("settle 60 -> 55: %+v, want spent 55 reserved 40 fired bit 0", r)
	}
	// The 40 cost 30: 85 spent, past the second threshold; the first does not fire again.
	if r := mustSettle(t, l, "", p, 10, 40, 30); r.Spent != 85 || r.Reserved != 0 || r.Fired != 2 {
		t.Fatalf("settle 40 -> 30: %+v, want spent 85 fired bit 1", r)
	}
	if r := mustReserve(t, l, "", p, 16); r.OK {
		t.Fatalf("16 on top of 85: %+v, want refused", r)
	}
	if r := mustReserve(t, l, "", p, 15); !r.OK {
		t.Fatalf("15 on top of 85: %+v, want admitted", r)
	}
	if r := mustReserve(t, l, "", p, 101); r.OK || !r.Never {
		t.Fatalf("an amount above the cap: %+v, want Never", r)
	}
	// A new day starts from zero, with its flags re-armed.
	next := day(11)
	if r := mustReserve(t, l, "", next, 100); !r.OK || r.Spent != 0 || r.Reserved != 100 {
		t.Fatalf("the next day: %+v", r)
	}
	if r := mustSettle(t, l, "", next, 11, 100, 90); r.Fired != 3 {
		t.Fatalf("the next day's spend fires both thresholds again: %+v", r)
	}
	// A reservation from the previous day settles into nothing: its slice has left.
	if r := mustSettle(t, l, "", next, 10, 15, 15); r.Spent != 90 || r.Reserved != 0 {
		t.Fatalf("settling into a past day: %+v", r)
	}
}

func TestLedgerOverAdmitsPastTheCap(t *testing.T) {
	l := limitstore.NewLedger(limitstore.BudgetSpec{Cap: 10})
	p := day(1)
	mustReserve(t, l, "", p, 10)
	r, err := l.Reserve(ctx, "", p, 5, true)
	if err != nil || !r.OK || r.Reserved != 15 {
		t.Fatalf("over: %+v %v", r, err)
	}
	if r := mustReserve(t, l, "", p, 0); r.OK {
		t.Fatalf("nothing fits a window past its cap, not even 0: %+v", r)
	}
}

func TestLedgerRollingSlices(t *testing.T) {
	const n = 4
	l := limitstore.NewLedger(limitstore.BudgetSpec{Cap: 100})
	for id := int64(100); id < 104; id++ { // 25 spent in each of four slices
		p := rolling(id, n)
		mustReserve(t, l, "", p, 25)
		mustSettle(t, l, "", p, id, 25, 25)
	}
	p := rolling(103, n)
	r := mustReserve(t, l, "", p, 30)
	if r.OK || r.FreeAfter != 101 {
		t.Fatalf("30 in a full window: %+v, want refused until slices 100 and 101 leave", r)
	}
	// Slice 100 leaves: 75 spent, 25 room.
	if r := mustReserve(t, l, "", rolling(104, n), 30); r.OK || r.Spent != 75 || r.FreeAfter != 101 {
		t.Fatalf("after slice 100 left: %+v", r)
	}
	if r := mustReserve(t, l, "", rolling(104, n), 25); !r.OK {
		t.Fatalf("25 after slice 100 left: %+v", r)
	}
	// Far later, everything has left.
	if r := mustReserve(t, l, "", rolling(200, n), 100); !r.OK || r.Spent != 0 || r.Reserved != 100 {
		t.Fatalf("an empty window: %+v", r)
	}
}

func TestLedgerKeysApart(t *testing.T) {
	l := limitstore.NewLedger(limitstore.BudgetSpec{Cap: 10})
	p := day(1)
	mustReserve(t, l, "team-a", p, 10)
	if r := mustReserve(t, l, "team-b", p, 10); !r.OK {
		t.Fatalf("team-b has a budget of its own: %+v", r)
	}
	if r := mustReserve(t, l, "team-a", p, 1); r.OK {
		t.Fatalf("team-a is full: %+v", r)
	}
}

// TestLedgerNumbers tries amounts at 0, negative, huge and MaxInt64: no overflow, no
// panic, totals saturate.
func TestLedgerNumbers(t *testing.T) {
	l := limitstore.NewLedger(limitstore.BudgetSpec{Cap: math.MaxInt64, Soft: []int64{math.MaxInt64}})
	p := day(1)
	for _, a := range []int64{0, -1, math.MinInt64, 1 << 62, math.MaxInt64} {
		if _, err := l.Reserve(ctx, "", p, a, true); err != nil {
			t.Fatal(err)
		}
	}
	r := mustSettle(t, l, "", p, 1, math.MaxInt64, math.MaxInt64)
	if r.Spent != math.MaxInt64 || r.Reserved < 0 || r.Fired != 1 {
		t.Fatalf("saturating: %+v", r)
	}
	r = mustSettle(t, l, "", p, 1, math.MinInt64, math.MinInt64)
	if r.Spent != math.MaxInt64 || r.Reserved < 0 {
		t.Fatalf("negative settle changes nothing: %+v", r)
	}
	// A zero cap admits free calls only.
	z := limitstore.NewLedger(limitstore.BudgetSpec{Cap: 0})
	if r := mustReserve(t, z, "", p, 1); r.OK || !r.Never {
		t.Fatalf("zero cap, 1: %+v", r)
	}
	if r := mustReserve(t, z, "", p, 0); !r.OK {
		t.Fatalf("zero cap, 0: %+v", r)
	}
}

// TestLedgerConcurrent reserves from many goroutines: the reservations never exceed the
// cap, and what was refused plus what was taken is what was asked.
func TestLedgerConcurrent(t *testing.T) {
	store := limitstore.NewMemory().(limitstore.BudgetStore)
	const cap, workers, per = 1000, 8, 200
	a := store.OpenBudget("daily", limitstore.BudgetSpec{Cap: cap})
	b := store.OpenBudget("daily", limitstore.BudgetSpec{Cap: cap}) // the same ledger
	p := day(1)
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := int64(0)
	for w := range workers {
		l := a
		if w%2 == 1 {
			l = b
		}
		wg.Go(func() {
			for range per {
				r, err := l.Reserve(ctx, "", p, 3, false)
				if err != nil {
					t.Error(err)
					return
				}
				if r.OK {
					mu.Lock()
					taken += 3
					mu.Unlock()
					if _, err := l.Settle(ctx, "", p, 1, 3, 2); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	r := mustReserve(t, a, "", p, 0)
	if r.Reserved != 0 || r.Spent != taken/3*2 || r.Spent > cap {
		t.Fatalf("after the run: %+v, taken %d", r, taken)
	}
	if r.Spent < cap-3 {
		t.Fatalf("spent %d: the cap of %d was not used up", r.Spent, cap)
	}
}

// TestLedgerForgetsPastKeys checks that keys whose windows passed are dropped: a stream
// of partition names over time does not grow the ledger without bound; the keys of the
// current window stay.
func TestLedgerForgetsPastKeys(t *testing.T) {
	l := limitstore.NewLedger(limitstore.BudgetSpec{Cap: 10})
	for i := range 10_000 {
		mustReserve(t, l, "p"+strconv.Itoa(i), day(int64(i)+1), 0) // a new day each: the others are past
	}
	if n := l.(interface{ Keys() int }).Keys(); n > 2100 {
		t.Fatalf("%d keys kept, want the past ones dropped", n)
	}
	// Keys of the current window are all kept.
	l = limitstore.NewLedger(limitstore.BudgetSpec{Cap: 10})
	for i := range 5000 {
		mustReserve(t, l, "p"+strconv.Itoa(i), day(1), 0)
	}
	if n := l.(interface{ Keys() int }).Keys(); n != 5000 {
		t.Fatalf("%d keys kept, want the window's 5000", n)
	}
}

// TestLedgerStragglerSlice checks a reservation made with an older period (a caller whose
// clock read earlier) between calls with the current one: the older slice counts until a
// caller with the current period drops it, as it would without the ledger's shortcut
// for a key already brought to the current period.
func TestLedgerStragglerSlice(t *testing.T) {
	const n = 4
	l := limitstore.NewLedger(limitstore.BudgetSpec{Cap: 100})
	cur := rolling(105, n) // slices 102–105
	mustReserve(t, l, "", cur, 10)
	if r := mustReserve(t, l, "", rolling(101, n), 20); !r.OK || r.Reserved != 30 {
		t.Fatalf("the straggler's reservation in slice 101: %+v", r)
	}
	// Slice 101 is outside the current window: dropped with its 20.
	if r := mustReserve(t, l, "", cur, 5); !r.OK || r.Reserved != 15 {
		t.Fatalf("the current period after the straggler: %+v, want slice 101 dropped", r)
	}
	// The same within a calendar window's epoch, and a day later.
	if r := mustSettle(t, l, "", cur, 105, 15, 15); r.Spent != 15 || r.Reserved != 0 {
		t.Fatalf("settle: %+v", r)
	}
	if r := mustReserve(t, l, "", rolling(110, n), 100); !r.OK || r.Spent != 0 {
		t.Fatalf("a later window: %+v", r)
	}
}
