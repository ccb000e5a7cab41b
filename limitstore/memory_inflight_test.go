package limitstore_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient/limitstore"
)

// An InFlight charge is held until the request ends: the token bucket refills as the
// vendor's, whose level is the bucket's plus what is held and which gets no refill once
// that is its burst (the bucket's, or VendorBurst).
func TestInFlightChargeLosesRefillAtTheVendorsBurst(t *testing.T) {
	for _, tc := range []struct {
		name        string
		inFlight    bool
		vendorBurst float64
		want        float64 // the level a second after the charge
	}{
		{"not held", false, 0, 10},                  // refills to its burst
		{"held", true, 0, 4},                        // the vendor's bucket is full at 4 + 6
		{"held, larger vendor bucket", true, 13, 7}, // full at 7 + 6 = 13
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				st := limitstore.NewState(limitstore.Spec{Tokens: limitstore.Rate{PerSecond: 10, Burst: 10}})
				g, err := st.Reserve(ctx, limitstore.Reservation{Tokens: 6, MaxWait: -1, InFlight: tc.inFlight, VendorBurst: tc.vendorBurst})
				if err != nil || !g.OK || g.Wait != 0 {
					t.Fatalf("reserve: %+v, %v", g, err)
				}
				levels := st.(interface{ Levels() (float64, float64) })
				time.Sleep(time.Second)
				if _, tok := levels.Levels(); tok != tc.want {
					t.Fatalf("level %v a second after the charge, want %v", tok, tc.want)
				}
				// The request ends: the vendor counted 8, 2 more than charged.
				a := st.(limitstore.InFlightAdjuster)
				if err := a.AdjustInFlight(ctx, g.Mark, 6, 0, 2); err != nil {
					t.Fatal(err)
				}
				if _, tok := levels.Levels(); tok != tc.want-2 {
					t.Fatalf("level %v once the request ended, want %v", tok, tc.want-2)
				}
				// Nothing is held any more: the bucket refills to its burst.
				time.Sleep(time.Second)
				if _, tok := levels.Levels(); tok != 10 {
					t.Fatalf("level %v a second later, want 10", tok)
				}
			})
		})
	}
}
