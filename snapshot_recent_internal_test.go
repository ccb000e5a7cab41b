package llmclient

import (
	"math"
	"testing"
	"time"

	"github.com/llmclient/llmclient/failure"
)

// Every latency lands in a bin whose middle is within 13% of it; negative and huge ones
// are clamped, never out of range.
func TestRecentBins(t *testing.T) {
	for _, d := range []time.Duration{-time.Hour, math.MinInt64, 0, time.Nanosecond, time.Microsecond, 3 * time.Microsecond,
		4 * time.Microsecond, 7 * time.Microsecond, time.Millisecond, 1500 * time.Millisecond, time.Minute,
		9 * time.Hour, 10 * time.Hour, math.MaxInt64} {
		i := recentBin(d)
		if i < 0 || i >= recentBins {
			t.Fatalf("recentBin(%v) = %d, outside [0, %d)", d, i, recentBins)
		}
		v := recentBinValue(i)
		switch {
		case d < time.Microsecond:
			if i != 0 {
				t.Errorf("recentBin(%v) = %d, want 0", d, i)
			}
		case d <= 9*time.Hour:
			if rel := math.Abs(float64(v-d)) / float64(d); rel > 0.13 {
				t.Errorf("recentBin(%v): bin value %v is %.0f%% off", d, v, rel*100)
			}
		default:
			if i != recentBins-1 {
				t.Errorf("recentBin(%v) = %d, want the last bin", d, i)
			}
		}
	}
	for i := 1; i < recentBins; i++ {
		if recentBinValue(i) <= recentBinValue(i-1) {
			t.Fatalf("bin values not increasing at %d: %v <= %v", i, recentBinValue(i), recentBinValue(i-1))
		}
	}
}

// A sample far older than a slot's period does not reset it, and the window only counts
// slots of its last minute.
func TestRecentWindow(t *testing.T) {
	var r recentStats
	now := time.Unix(1_000_000, 0)
	r.add(now, time.Second, failure.None)
	r.add(now, time.Second, failure.RateLimited)
	r.add(now.Add(-recentSlots*recentWidth), time.Second, failure.ServerError) // same slot, a minute older
	s := r.summary(now)
	if s.attempts != 2 || s.errors != 1 || s.rateLimited != 1 {
		t.Errorf("summary %+v, want 2 attempts, 1 error, 1 rate limited", s)
	}
	if s := r.summary(now.Add(recentSlots * recentWidth)); s.attempts != 0 {
		t.Errorf("a minute later: %+v, want nothing", s)
	}
	r.add(now.Add(recentSlots*recentWidth), time.Millisecond, failure.Canceled)
	if s := r.summary(now.Add(recentSlots * recentWidth)); s.attempts != 1 || s.errors != 0 || s.p50 > 2*time.Millisecond {
		t.Errorf("after the slot's reuse: %+v, want one canceled attempt, not an error", s)
	}
}
