package breaker_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient/breaker"
)

// Slow calls trip the breaker by their own ratio, as successes for the failure rules.
func TestBreakerSlowCallRatio(t *testing.T) {
	cfg := breaker.Config{MinRequests: 20, SlowCallRatio: 0.25, ConsecutiveFailures: 1000}
	b := newBreaker(t, cfg)
	callN(t, b, breaker.Success, 15)
	callN(t, b, breaker.Slow, 4) // 4 of 19: below the volume
	wantState(t, b, breaker.Closed)
	if s := b.Snapshot(); s.Successes != 19 || s.Slow != 4 || s.Failures != 0 {
		t.Fatalf("Snapshot = %+v, want 19 successes of which 4 slow", s)
	}
	call(t, b, breaker.Slow) // 5 of 20 = 0.25
	wantState(t, b, breaker.Open)

	// Slow successes do not count as failures: a failure ratio of one half is never
	// reached by slow calls alone when the slow rule is out of reach.
	b = newBreaker(t, breaker.Config{MinRequests: 10, FailureRatio: 0.5, SlowCallRatio: 1})
	callN(t, b, breaker.Slow, 9)
	call(t, b, breaker.Success)
	callN(t, b, breaker.Failure, 9) // 9 of 19 failed
	wantState(t, b, breaker.Closed)
	if s := b.Snapshot(); s.ConsecutiveFailures != 9 {
		t.Fatalf("ConsecutiveFailures = %d, want 9", s.ConsecutiveFailures)
	}
	call(t, b, breaker.Slow) // a slow success ends the run of failures
	if s := b.Snapshot(); s.ConsecutiveFailures != 0 {
		t.Fatalf("ConsecutiveFailures after a slow success = %d, want 0", s.ConsecutiveFailures)
	}
}

// A slow half-open probe reopens the breaker, as a failed probe does.
func TestBreakerSlowProbeReopens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker(t, breaker.Config{ConsecutiveFailures: 2, OpenTimeout: time.Second})
		trip(t, b, 2)
		time.Sleep(time.Second)
		call(t, b, breaker.Slow)
		wantState(t, b, breaker.Open)
		if s := b.Snapshot(); s.OpenRemaining != 2*time.Second {
			t.Fatalf("OpenRemaining = %v, want the doubled open time", s.OpenRemaining)
		}
	})
}

// Config reports the thresholds the Client reads, defaults filled in.
func TestBreakerConfigFilled(t *testing.T) {
	b := newBreaker(t, breaker.Config{SlowCall: 10 * time.Second})
	got := b.Config()
	if got.SlowCall != 10*time.Second || got.SlowFirstToken != breaker.DefaultSlowFirstToken ||
		got.SlowCallRatio != breaker.DefaultSlowCallRatio || got.MinRequests != breaker.DefaultMinRequests {
		t.Fatalf("Config() = %+v", got)
	}
	var nilB *breaker.Breaker
	if nilB.Config().SlowCall != breaker.DefaultSlowCall {
		t.Fatal("a nil breaker reports the defaults")
	}
}
