package breaker_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient/breaker"
)

// An operator can hold a breaker open or closed, and reset it.
func TestBreakerForcedStates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		b := newBreaker(t, breaker.Config{ConsecutiveFailures: 3, OpenTimeout: time.Second, OnStateChange: rec.record})

		b.ForceOpen()
		wantState(t, b, breaker.Open)
		time.Sleep(time.Hour) // far past any open time
		if _, err := b.Allow(); !errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("Allow on a forced-open breaker: %v", err)
		}
		if b.Admits() {
			t.Fatal("a forced-open breaker admits")
		}
		if s := b.Snapshot(); !s.Forced || s.State != breaker.Open || s.OpenRemaining != 0 {
			t.Fatalf("Snapshot = %+v", s)
		}

		b.ForceClosed()
		wantState(t, b, breaker.Closed)
		callN(t, b, breaker.Failure, 50) // no rule trips it
		wantState(t, b, breaker.Closed)
		if s := b.Snapshot(); !s.Forced || s.Failures != 50 {
			t.Fatalf("Snapshot = %+v, want the failures counted", s)
		}

		b.Reset()
		if s := b.Snapshot(); s.Forced || s.Failures != 0 || s.State != breaker.Closed {
			t.Fatalf("Snapshot after Reset = %+v", s)
		}
		trip(t, b, 3) // the rules apply again
		b.Reset()
		wantState(t, b, breaker.Closed)
		if got, want := rec.String(), "closed>open open>closed closed>open open>closed"; got != want {
			t.Fatalf("transitions %q, want %q", got, want)
		}

		var nilB *breaker.Breaker
		nilB.ForceOpen()
		nilB.ForceClosed()
		nilB.Reset()
	})
}
