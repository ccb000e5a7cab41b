package pricing

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestActiveSpanMatchesSearch checks the kept span of the active price against a search
// at every time: just before, at and after every start date and time-of-day edge, and at
// random times, in an order that moves back and forth across the edges.
func TestActiveSpanMatchesSearch(t *testing.T) {
	const file = `[{"id": "p", "models": [{"id": "m", "match": {"equals": "m"}, "prices": [
	 {"prices": {"input_mtok": 1, "output_mtok": 2}},
	 {"constraint": {"start_date": "2026-01-01"}, "prices": {"input_mtok": 3, "output_mtok": 4}},
	 {"constraint": {"start_time": "22:00:00+02:00", "end_time": "04:00:00.5+02:00"}, "prices": {"input_mtok": 5, "output_mtok": 6}},
	 {"constraint": {"start_time": "12:00:00Z", "end_time": "12:00:00Z"}, "prices": {"input_mtok": 7, "output_mtok": 8}},
	 {"constraint": {"start_date": "2026-03-01"}, "prices": {"input_mtok": 9, "output_mtok": 10}},
	 {"constraint": {"start_time": "08:30:00Z", "end_time": "09:00:00Z"}, "prices": {"input_mtok": 11, "output_mtok": 12}}
	]}]}]`
	tb, err := Load(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	m, ok := tb.Lookup("p", "m")
	if !ok {
		t.Fatal("no model")
	}
	var times []time.Time
	for _, d := range []string{"2025-12-31", "2026-01-01", "2026-01-02", "2026-02-28", "2026-03-01", "2026-03-02"} {
		day, _ := time.Parse(time.DateOnly, d)
		for _, edge := range []time.Duration{0, 2 * time.Hour, 2*time.Hour + 500*time.Millisecond,
			8*time.Hour + 30*time.Minute, 9 * time.Hour, 12 * time.Hour, 20 * time.Hour, 24 * time.Hour} {
			for _, off := range []time.Duration{-time.Nanosecond, 0, time.Nanosecond, time.Minute} {
				times = append(times, day.Add(edge+off))
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	lo := time.Date(2025, 12, 30, 0, 0, 0, 0, time.UTC).UnixNano()
	for range 2000 {
		times = append(times, time.Unix(0, lo+rng.Int64N(int64(65*24*time.Hour))))
	}
	// Outside the years spans are kept for: searched every time.
	times = append(times, time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC))
	for pass := range 3 {
		if pass > 0 {
			rng.Shuffle(len(times), func(i, j int) { times[i], times[j] = times[j], times[i] })
		}
		for _, at := range times {
			// Twice: once finding the span, once within it.
			for range 2 {
				if got, want := m.active(at), m.search(at); got != want {
					t.Fatalf("pass %d, %v: the kept span gives %+v, the search %+v", pass, at, *got, *want)
				}
			}
		}
	}
}

// TestCostAllocatesNotWithinSpan checks that pricing calls within the active price's span
// does not allocate.
func TestCostAllocatesNotWithinSpan(t *testing.T) {
	m, ok := Default().Lookup("deepseek", "deepseek-chat")
	if !ok || len(m.prices) < 2 {
		t.Fatal("the shipped snapshot has no time-of-day prices for deepseek-chat any more: pick another model for this test")
	}
	at := time.Date(2026, 5, 1, 3, 0, 0, 0, time.UTC)
	tk := Tokens{Input: 1000, CacheRead: 200, Output: 50}
	if _, err := m.Cost(tk, at); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = m.Cost(tk, at.Add(time.Second)) }); n != 0 {
		t.Fatalf("%v allocations per call", n)
	}
}
