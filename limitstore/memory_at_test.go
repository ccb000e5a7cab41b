package limitstore

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestMemStateReservesAtTheCallersClock: a Reservation's At stands in for the state's own
// clock reading; the zero time, or a reading from before the state began, does not.
func TestMemStateReservesAtTheCallersClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := tokenState() // 1000 tokens a second, a bucket of 10,000
		ctx := t.Context()
		reserve := func(at time.Time) time.Duration {
			t.Helper()
			var g Grant
			if err := st.ReserveTo(ctx, &Reservation{Requests: 1, Tokens: 10_000, MaxWait: -1, At: at}, &g); err != nil || !g.OK {
				t.Fatalf("ReserveTo: %+v, %v", g, err)
			}
			return g.Wait
		}
		start := time.Now()
		if w := reserve(start); w != 0 {
			t.Fatalf("a full bucket waits %v", w)
		}
		// The bucket is empty at start: refilled in 10 s. Asked "at" 4 s later, the wait is 6 s
		// although the clock has not moved.
		if w := reserve(start.Add(4 * time.Second)); w != 6*time.Second {
			t.Fatalf("at start+4s: wait %v, want 6s", w)
		}
		// Without At, the state's own clock (still start): 10 s for the first debt, 10 s more.
		if w := reserve(time.Time{}); w != 20*time.Second {
			t.Fatalf("own clock: wait %v, want 20s", w)
		}
		// A reading from before the state's epoch is not used.
		if w := reserve(start.Add(-time.Hour)); w != 30*time.Second {
			t.Fatalf("a reading before the epoch: wait %v, want 30s", w)
		}
	})
}
