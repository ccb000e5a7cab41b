package llmclient_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
)

// TestBudgetQuickPathMatchesLoop runs the same calls, side by side in virtual time,
// through a Client on the quick path of its one client-wide budget and through the same
// Client with the quick path turned off (the loop over every budget), and compares every
// answer, cost, budget status and budget event: for a daily and a rolling window, with
// calls of varied cost, failures, refusals at the cap, soft thresholds, and calls that
// end in another period than they began in.
func TestBudgetQuickPathMatchesLoop(t *testing.T) {
	for _, tc := range []struct {
		w   budget.Window
		cap pricing.Money
	}{{budget.Daily(nil), 5 * pricing.Cent}, {budget.Rolling(3 * time.Hour), pricing.Cent}} {
		t.Run(tc.w.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { quickVersusLoop(t, tc.w, tc.cap) })
		})
	}
}

func quickVersusLoop(t *testing.T, w budget.Window, limit pricing.Money) {
	m := priced(t, "m", pricing.Dollar, 4*pricing.Dollar, 0)
	rng := rand.New(rand.NewPCG(5, 6))
	latencies := []time.Duration{0, time.Second, 10 * time.Minute, 47 * time.Minute, 2 * time.Hour}
	const n = 400
	steps := func() []fake.Step {
		r := rand.New(rand.NewPCG(7, 8)) // the same steps for both Clients
		var out []fake.Step
		for range n {
			lat := latencies[r.IntN(len(latencies))]
			switch r.IntN(10) {
			case 0:
				out = append(out, fake.Fail(500).Latency(lat))
			case 1:
				out = append(out, fake.Fail(400).Latency(lat))
			default:
				out = append(out, fake.Reply("ok").Usage(r.IntN(3000), r.IntN(400)).Latency(lat))
			}
		}
		return out
	}
	var logs [2]eventLog
	var clients [2]*llmclient.Client
	for i := range clients {
		clients[i] = newClient(t, pricedUp("a", fake.New(steps()...), m), llmclient.WithObserver(logs[i].observe),
			llmclient.WithMaxAttempts(1), llmclient.WithCallBudget(0), // calls of up to 2h
			llmclient.WithBudget(budget.Budget{Name: "b", Window: w, Cap: limit, Soft: []float64{0.5, 0.8}}))
	}
	if !llmclient.BudgetQuickPath(clients[0], false) || !llmclient.BudgetQuickPath(clients[1], true) ||
		llmclient.BudgetQuickPath(clients[1], false) {
		t.Fatal("the first Client does not take the quick path, or the second still does")
	}
	type outcome struct {
		cost   pricing.Cost
		class  failure.Class
		err    bool
		admit  time.Duration
		status budget.Status
	}
	refused, ok := 0, 0
	for i := range n {
		var got [2]outcome
		var wg sync.WaitGroup
		for j, c := range clients {
			wg.Go(func() { // side by side: both calls begin and end at the same virtual time
				resp, err := c.Complete(context.Background(), budgetReq())
				o := &got[j]
				if err == nil {
					o.cost = resp.Cost
				} else {
					var e *llmclient.Error
					if !errors.As(err, &e) {
						t.Errorf("call %d: %v", i, err)
						return
					}
					o.cost, o.class, o.err, o.admit = e.Cost, e.Class, true, e.AdmitAfter
				}
				o.status, err = c.Budget(context.Background(), "b", "")
				if err != nil {
					t.Errorf("call %d: Budget: %v", i, err)
				}
			})
		}
		wg.Wait()
		if got[0] != got[1] {
			t.Fatalf("call %d: quick path %+v, loop %+v", i, got[0], got[1])
		}
		if got[0].class == failure.BudgetExceeded {
			refused++
		} else if !got[0].err {
			ok++
		}
		time.Sleep(time.Duration(rng.IntN(20)) * time.Minute)
	}
	if refused < 20 || ok < 100 {
		t.Fatalf("%d calls refused at the cap and %d through: the cases miss the cap or the calls", refused, ok)
	}
	evs := [2][]llmclient.Event{logs[0].kinds(event.Budget), logs[1].kinds(event.Budget)}
	if len(evs[0]) != len(evs[1]) {
		t.Fatalf("%d budget events on the quick path, %d on the loop", len(evs[0]), len(evs[1]))
	}
	soft := 0
	for i := range evs[0] {
		a, b := evs[0][i], evs[1][i]
		if *a.Budget != *b.Budget || a.Class != b.Class || a.Attempt != b.Attempt {
			t.Fatalf("event %d: quick path %+v, loop %+v", i, a.Budget, b.Budget)
		}
		if !a.Budget.Hard {
			soft++
		}
	}
	if soft < 4 {
		t.Fatalf("%d soft events: the cases miss the thresholds", soft)
	}
}
