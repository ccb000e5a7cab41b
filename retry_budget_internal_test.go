package llmclient

import (
	"testing"
	"time"
)

func TestRetryBudgetBoundsAndSlides(t *testing.T) {
	cfg := defaultRetryConfig()
	b := newRetryBudget(&cfg)
	now := time.Unix(1_000_000, 0)
	for range 100 {
		b.first(now)
	}
	allowed := 0
	for range 1000 {
		if b.tryRetry(now) {
			allowed++
		}
	}
	if want := 30 + 10; allowed != want { // 0.3 × 100 firsts + a floor of 10
		t.Fatalf("%d retries allowed, want %d", allowed, want)
	}
	// Half a window later, the same counts are still in it.
	if b.tryRetry(now.Add(5 * time.Second)) {
		t.Fatal("retry allowed while the window still holds the spent budget")
	}
	// Once the window has slid past them, only the floor is left.
	later := now.Add(11 * time.Second)
	allowed = 0
	for range 100 {
		if b.tryRetry(later) {
			allowed++
		}
	}
	if allowed != 10 {
		t.Fatalf("%d retries allowed in a fresh window, want the floor of 10", allowed)
	}
}
