package budget_test

import (
	"math"
	"testing"
	"time"
	_ "time/tzdata" // the zones these tests need, on a machine without zoneinfo too

	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/pricing"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func mustLoad(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("time zone %s: %v", name, err)
	}
	return loc
}

// TestCalendarWindows: calendar windows start over at the local hour, midnight and first
// of the month of their time zone, daylight saving changes included.
func TestCalendarWindows(t *testing.T) {
	paris := mustLoad(t, "Europe/Paris")
	kolkata := mustLoad(t, "Asia/Kolkata")
	for _, tc := range []struct {
		name       string
		w          budget.Window
		at         time.Time
		start, end time.Time
	}{
		{"daily UTC", budget.Daily(nil), time.Date(2026, 3, 10, 15, 4, 5, 0, time.UTC),
			time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 11, 0, 0, 0, 0, time.UTC)},
		{"daily Paris: 23:30 UTC is the next day", budget.Daily(paris), time.Date(2026, 3, 10, 23, 30, 0, 0, time.UTC),
			time.Date(2026, 3, 11, 0, 0, 0, 0, paris), time.Date(2026, 3, 12, 0, 0, 0, 0, paris)},
		{"daily Paris across spring forward: 23 hours", budget.Daily(paris), time.Date(2026, 3, 29, 12, 0, 0, 0, paris),
			time.Date(2026, 3, 29, 0, 0, 0, 0, paris), time.Date(2026, 3, 30, 0, 0, 0, 0, paris)},
		{"hourly Kolkata: half-hour offset", budget.Hourly(kolkata), time.Date(2026, 1, 1, 10, 45, 0, 0, time.UTC),
			time.Date(2026, 1, 1, 16, 0, 0, 0, kolkata), time.Date(2026, 1, 1, 17, 0, 0, 0, kolkata)},
		{"monthly Paris: February", budget.Monthly(paris), time.Date(2026, 2, 14, 9, 0, 0, 0, paris),
			time.Date(2026, 2, 1, 0, 0, 0, 0, paris), time.Date(2026, 3, 1, 0, 0, 0, 0, paris)},
		{"monthly UTC: December to January", budget.Monthly(nil), time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC),
			time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"the zero window is daily in UTC", budget.Window{}, time.Date(2026, 5, 5, 5, 5, 5, 0, time.UTC),
			time.Date(2026, 5, 5, 0, 0, 0, 0, time.UTC), time.Date(2026, 5, 6, 0, 0, 0, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.w.PeriodAt(tc.at)
			if !p.Start.Equal(tc.start) || !p.End.Equal(tc.end) {
				t.Fatalf("PeriodAt(%v) = [%v, %v), want [%v, %v)", tc.at, p.Start, p.End, tc.start, tc.end)
			}
			if p.Slice != tc.start.Unix() || p.Oldest != p.Slice || p.Epoch != p.Slice {
				t.Fatalf("ids %+v, want the start's Unix seconds", p)
			}
			if got := tc.w.SliceEnd(p, p.Slice); !got.Equal(tc.end) {
				t.Fatalf("SliceEnd = %v, want the window's end", got)
			}
			// The last instant of the window is in it; its end starts the next.
			if q := tc.w.PeriodAt(tc.end.Add(-time.Nanosecond)); q.Slice != p.Slice {
				t.Fatalf("the window's last instant is in %+v", q)
			}
			if q := tc.w.PeriodAt(tc.end); q.Slice == p.Slice || !q.Start.Equal(tc.end) {
				t.Fatalf("the window's end is in %+v", q)
			}
		})
	}
}

// TestRollingWindow: a rolling window counts Slices slices of a sixtieth of its length;
// its epoch changes once per length.
func TestRollingWindow(t *testing.T) {
	w := budget.Rolling(time.Hour)
	at := time.Date(2026, 6, 1, 12, 30, 30, 0, time.UTC)
	p := w.PeriodAt(at)
	if p.Slice-p.Oldest != budget.Slices-1 {
		t.Fatalf("%+v: want %d slices", p, budget.Slices)
	}
	if !p.End.Equal(time.Date(2026, 6, 1, 12, 31, 0, 0, time.UTC)) || !p.Start.Equal(p.End.Add(-time.Hour)) {
		t.Fatalf("bounds [%v, %v)", p.Start, p.End)
	}
	// The oldest slice leaves when the next slice begins; the current one an hour later.
	if got, want := w.SliceEnd(p, p.Oldest), p.End; !got.Equal(want) {
		t.Fatalf("the oldest slice leaves at %v, want %v", got, want)
	}
	if got, want := w.SliceEnd(p, p.Slice), p.End.Add(time.Hour-time.Minute); !got.Equal(want) {
		t.Fatalf("the oldest slice leaves at %v, want %v", got, want)
	}
	if q := w.PeriodAt(at.Add(time.Minute)); q.Slice != p.Slice+1 {
		t.Fatalf("a minute later: slice %d, want %d", q.Slice, p.Slice+1)
	}
	if q := w.PeriodAt(at.Add(time.Hour)); q.Epoch != p.Epoch+1 {
		t.Fatalf("an hour later: epoch %d, want %d", q.Epoch, p.Epoch+1)
	}
	// Before 1970 the slices still count down in order.
	if a, b := w.PeriodAt(time.Unix(-30, 0)), w.PeriodAt(time.Unix(30, 0)); a.Slice != b.Slice-1 {
		t.Fatalf("slices around the Unix epoch: %d, %d", a.Slice, b.Slice)
	}
	if w.Length() != time.Hour || !w.IsRolling() || w.Location() != nil || budget.Daily(nil).Length() != 0 {
		t.Fatal("accessors")
	}
}

// TestThresholds: soft fractions become amounts of the cap, exactly, for caps up to
// MaxMoney.
func TestThresholds(t *testing.T) {
	b := budget.Budget{Cap: pricing.MaxMoney, Soft: []float64{0.8, 0.5}}
	got := b.Thresholds()
	// MaxMoney × 0.8 = 7378697629483820645.6, rounded down; no float64 in between.
	want := []pricing.Money{pricing.MaxMoney / 2, 7378697629483820645}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("Thresholds = %v, want %v", got, want)
	}
	if f := b.FractionOf(got[1]); f != 0.8 {
		t.Fatalf("FractionOf = %v", f)
	}
	tiny := budget.Budget{Cap: 3, Soft: []float64{0.000001}}
	if got := tiny.Thresholds(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("a threshold is at least one picodollar: %v", got)
	}
	bad := budget.Budget{Cap: 100, Soft: []float64{math.NaN(), -1, 2}}
	if got := bad.Thresholds(); len(got) != 0 {
		t.Fatalf("invalid fractions are left out: %v", got)
	}
}

// TestFailoverWithin: the ratio is compared exactly, for any amounts.
func TestFailoverWithin(t *testing.T) {
	f := budget.Failover{MaxRatio: 3}
	for _, tc := range []struct {
		first, target pricing.Money
		want          bool
	}{
		{100, 300, true},
		{100, 301, false},
		{0, 0, true},
		{0, 1, false},
		{-5, 0, true}, // negative amounts count as 0
		{pricing.MaxMoney, pricing.MaxMoney, true},
		{pricing.MaxMoney/3 + 1, pricing.MaxMoney, true},
		{pricing.MaxMoney / 3, pricing.MaxMoney, false}, // 3 × it is MaxMoney - 1
	} {
		if got := f.Within(tc.first, tc.target); got != tc.want {
			t.Errorf("Within(%v, %v) = %v", tc.first, tc.target, got)
		}
	}
	if (budget.Failover{MaxRatio: 1.5}).Within(2, 3) != true || (budget.Failover{MaxRatio: 1.5}).Within(2, 4) {
		t.Error("fractional ratio")
	}
}

// TestStrings: what errors and events print.
func TestStrings(t *testing.T) {
	for got, want := range map[string]string{
		budget.Client().String():              "client",
		budget.Partition("a").String():        `partition "a"`,
		budget.EachPartition("team").String(): "each partition",
		budget.Upstream("x").String():         `upstream "x"`,
		budget.Model("m").String():            `model "m"`,
		budget.Rolling(time.Hour).String():    "rolling 1h0m0s",
		budget.Daily(nil).String():            "daily in UTC",
		budget.UnpricedCharge.String():        "charge",
	} {
		if got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}
}
