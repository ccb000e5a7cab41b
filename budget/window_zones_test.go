package budget_test

import (
	"math"
	"testing"
	"time"

	"github.com/llmclient/llmclient/budget"
)

// TestCalendarWindowsAtOddTransitions: a calendar window begins at the first instant of
// its hour, day or month, also where daylight saving time begins at midnight (the day's
// midnight never shows), ends at one in the morning (midnight shows twice) or moves the
// clock by half an hour; consecutive windows meet.
func TestCalendarWindowsAtOddTransitions(t *testing.T) {
	havana := mustLoad(t, "America/Havana")
	lordHowe := mustLoad(t, "Australia/Lord_Howe")
	utc := func(y int, m time.Month, d, h, min int) time.Time { return time.Date(y, m, d, h, min, 0, 0, time.UTC) }
	for _, tc := range []struct {
		name       string
		w          budget.Window
		at         time.Time
		start, end time.Time
	}{
		// 2026-03-08 00:00 CST (05:00 UTC) became 01:00 CDT.
		{"daily Havana: the day before a midnight that never shows", budget.Daily(havana), utc(2026, 3, 8, 4, 30),
			utc(2026, 3, 7, 5, 0), utc(2026, 3, 8, 5, 0)},
		{"daily Havana: the day whose midnight never shows", budget.Daily(havana), utc(2026, 3, 8, 5, 30),
			utc(2026, 3, 8, 5, 0), utc(2026, 3, 9, 4, 0)},
		// 2026-11-01 01:00 CDT (05:00 UTC) became 00:00 CST: midnight showed at 04:00 and
		// at 05:00 UTC.
		{"daily Havana: the first of two midnights", budget.Daily(havana), utc(2026, 11, 1, 4, 30),
			utc(2026, 11, 1, 4, 0), utc(2026, 11, 2, 5, 0)},
		{"daily Havana: after the second midnight", budget.Daily(havana), utc(2026, 11, 1, 5, 30),
			utc(2026, 11, 1, 4, 0), utc(2026, 11, 2, 5, 0)},
		{"daily Havana: the day before two midnights", budget.Daily(havana), utc(2026, 11, 1, 3, 59),
			utc(2026, 10, 31, 4, 0), utc(2026, 11, 1, 4, 0)},
		// 2012-04-01 00:00 CST became 01:00 CDT.
		{"monthly Havana: a month whose first midnight never shows", budget.Monthly(havana), utc(2012, 3, 31, 12, 0),
			utc(2012, 3, 1, 5, 0), utc(2012, 4, 1, 5, 0)},
		// 2026-04-05 02:00 +11 (15:00 UTC) became 01:30 +1030.
		{"hourly Lord Howe: the hour the change ends", budget.Hourly(lordHowe), utc(2026, 4, 4, 14, 50),
			utc(2026, 4, 4, 14, 0), utc(2026, 4, 4, 15, 0)},
		{"hourly Lord Howe: the half hour after the change", budget.Hourly(lordHowe), utc(2026, 4, 4, 15, 10),
			utc(2026, 4, 4, 15, 0), utc(2026, 4, 4, 15, 30)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.w.PeriodAt(tc.at)
			if !p.Start.Equal(tc.start) || !p.End.Equal(tc.end) || p.Slice != tc.start.Unix() {
				t.Fatalf("PeriodAt(%v) = [%v, %v) slice %d, want [%v, %v)", tc.at, p.Start.UTC(), p.End.UTC(), p.Slice, tc.start, tc.end)
			}
			if q := tc.w.PeriodAt(tc.end); !q.Start.Equal(tc.end) || q.Slice <= p.Slice {
				t.Fatalf("the next window is [%v, %v), want it to start at %v", q.Start.UTC(), q.End.UTC(), tc.end)
			}
		})
	}
}

// TestCalendarWindowsMeet walks the calendar windows of zones with unusual transitions
// over years of their rules: every window holds its instants, has a later slice than the
// one before, and starts where that one ended.
func TestCalendarWindowsMeet(t *testing.T) {
	zones := []string{"America/Havana", "America/Santiago", "America/Sao_Paulo", "America/Asuncion",
		"Atlantic/Azores", "Asia/Amman", "Asia/Beirut", "Asia/Tehran", "Africa/Cairo", "Antarctica/Casey",
		"Australia/Lord_Howe", "Pacific/Apia", "Pacific/Fakaofo", "Europe/Paris", "Asia/Kolkata"}
	for _, z := range zones {
		loc := mustLoad(t, z)
		for _, w := range []budget.Window{budget.Daily(loc), budget.Monthly(loc), budget.Hourly(loc)} {
			from, to := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			if w == budget.Hourly(loc) {
				from = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
			}
			p := w.PeriodAt(from)
			for p.End.Before(to) {
				if r := w.PeriodAt(p.End.Add(-time.Nanosecond)); r.Slice != p.Slice {
					t.Fatalf("%v: the last instant of [%v, %v) is in [%v, %v)", w, p.Start, p.End, r.Start, r.End)
				}
				q := w.PeriodAt(p.End)
				if !q.Start.Equal(p.End) || q.Slice <= p.Slice || !q.End.After(q.Start) {
					t.Fatalf("%v: [%v, %v) is followed by [%v, %v)", w, p.Start, p.End, q.Start, q.End)
				}
				p = q
			}
		}
	}
}

// TestRollingOutsideBounds: a rolling window whose length Validate rejects still has
// periods, those of the nearest bound, instead of a division by zero.
func TestRollingOutsideBounds(t *testing.T) {
	at := time.Date(2026, 6, 1, 12, 30, 30, 0, time.UTC)
	for _, tc := range []struct {
		d    time.Duration
		like time.Duration
	}{
		{0, budget.MinRolling}, {-time.Hour, budget.MinRolling}, {59, budget.MinRolling},
		{math.MaxInt64, budget.MaxRolling}, {math.MinInt64, budget.MinRolling},
	} {
		w := budget.Rolling(tc.d)
		b := budget.Budget{Name: "b", Window: w, Cap: 1}
		if b.Validate() == nil {
			t.Errorf("Rolling(%v): Validate accepted it", tc.d)
		}
		got, want := w.PeriodAt(at), budget.Rolling(tc.like).PeriodAt(at)
		if got != want {
			t.Errorf("Rolling(%v).PeriodAt = %+v, want %+v", tc.d, got, want)
		}
		if got, want := w.SliceEnd(got, got.Slice), budget.Rolling(tc.like).SliceEnd(want, want.Slice); !got.Equal(want) {
			t.Errorf("Rolling(%v).SliceEnd = %v, want %v", tc.d, got, want)
		}
	}
}
