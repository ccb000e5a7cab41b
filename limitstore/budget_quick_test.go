package limitstore_test

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/llmclient/llmclient/limitstore"
)

// quickReserve is what llmclient does with a QuickLedger: the quick path, then Reserve for
// a refusal.
func quickReserve(t *testing.T, l limitstore.Ledger, p limitstore.BudgetPeriod, amount int64, over bool) limitstore.BudgetResult {
	t.Helper()
	if l.(limitstore.QuickLedger).ReserveQuick(p, amount, over) {
		return limitstore.BudgetResult{OK: true}
	}
	r, err := l.Reserve(ctx, "", p, amount, over)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestQuickLedgerMatchesLedger drives two ledgers with the same random operations on the
// key "", one through Reserve and Settle, the other through the quick path: calendar and
// rolling periods, stragglers with an older period, settles into past slices, amounts at
// 0, negative and huge. Every answer and the totals must agree.
func TestQuickLedgerMatchesLedger(t *testing.T) {
	for _, rollingWindow := range []bool{false, true} {
		spec := limitstore.BudgetSpec{Cap: 1000, Soft: []int64{300, 600, 900}}
		plain, quick := limitstore.NewLedger(spec), limitstore.NewLedger(spec)
		rng := rand.New(rand.NewPCG(7, uint64(len(spec.Soft))))
		type hold struct{ slice, amount int64 }
		var holds []hold
		now := int64(100)
		period := func(id int64) limitstore.BudgetPeriod {
			if rollingWindow {
				return rolling(id, 4)
			}
			return day(id)
		}
		amounts := []int64{0, -5, 1, 10, 50, 200, 1 << 62}
		for i := range 5000 {
			if rng.IntN(40) == 0 {
				now++ // the next slice or day
			}
			id := now
			if rng.IntN(10) == 0 {
				id -= int64(rng.IntN(3)) // a straggler's older clock
			}
			p := period(id)
			if len(holds) == 0 || rng.IntN(2) == 0 {
				amount := amounts[rng.IntN(len(amounts))]
				over := rng.IntN(20) == 0
				want, err := plain.Reserve(ctx, "", p, amount, over)
				if err != nil {
					t.Fatal(err)
				}
				got := quickReserve(t, quick, p, amount, over)
				if got.OK != want.OK || !got.OK && got != want {
					t.Fatalf("rolling %v, op %d: reserve %d in %+v: quick %+v, plain %+v", rollingWindow, i, amount, p, got, want)
				}
				if want.OK {
					holds = append(holds, hold{p.Slice, amount})
				}
				continue
			}
			k := rng.IntN(len(holds))
			h := holds[k]
			holds = append(holds[:k], holds[k+1:]...)
			spent := max(h.amount, 0) * int64(rng.IntN(3)) / 2
			want, err := plain.Settle(ctx, "", p, h.slice, h.amount, spent)
			if err != nil {
				t.Fatal(err)
			}
			if got := quick.(limitstore.QuickLedger).SettleQuick(p, h.slice, h.amount, spent); got != want {
				t.Fatalf("rolling %v, op %d: settle %+v spent %d in %+v: quick %+v, plain %+v", rollingWindow, i, h, spent, p, got, want)
			}
		}
	}
}

// TestQuickLedgerConcurrent reserves and settles through the quick path from many
// goroutines sharing a ledger (run it with -race): reservations never exceed the cap, the
// totals come out exact, and each soft threshold fires exactly once in the window.
func TestQuickLedgerConcurrent(t *testing.T) {
	const capacity, workers, per = 3000, 8, 400
	store := limitstore.NewMemory().(limitstore.BudgetStore)
	l := store.OpenBudget("daily", limitstore.BudgetSpec{Cap: capacity, Soft: []int64{1000, 2000}})
	p := day(1)
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken, fired := int64(0), map[uint32]int{}
	for range workers {
		wg.Go(func() {
			for range per {
				r := quickReserve(t, l, p, 3, false)
				if !r.OK {
					continue
				}
				mu.Lock()
				taken += 3
				mu.Unlock()
				res := l.(limitstore.QuickLedger).SettleQuick(p, 1, 3, 2)
				if res.Reserved < 0 || res.Spent > capacity {
					t.Errorf("settle: %+v", res)
				}
				for bit := uint32(1); bit <= 2; bit <<= 1 {
					if res.Fired&bit != 0 {
						mu.Lock()
						fired[bit]++
						mu.Unlock()
					}
				}
			}
		})
	}
	wg.Wait()
	r, err := l.Reserve(ctx, "", p, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	if r.Reserved != 0 || r.Spent != taken/3*2 || r.Spent > capacity || r.Spent < capacity-3 {
		t.Fatalf("after the run: %+v, taken %d", r, taken)
	}
	if fired[1] != 1 || fired[2] != 1 {
		t.Fatalf("soft thresholds fired %v, want each once", fired)
	}
}
