package budget

import (
	"fmt"
	"time"
)

// Window is the period a budget's cap applies to: a calendar hour, day or month in a time
// zone, or a rolling duration. The zero Window is Daily(time.UTC). A Window is a small
// value, safe to copy and to share.
type Window struct {
	kind   windowKind
	length time.Duration // rolling only
	loc    *time.Location
}

type windowKind uint8

const (
	daily windowKind = iota // the zero Window
	hourly
	monthly
	rolling
)

// Slices is the number of slices a rolling window is counted in: spend is kept per slice
// of a sixtieth of the window, and a slice leaves the window whole, so a rolling window
// of an hour counts what the last 59 to 60 minutes spent.
const Slices = 60

// Bounds on a rolling window's length.
const (
	MinRolling = time.Minute
	MaxRolling = 400 * 24 * time.Hour
)

// Hourly returns calendar hours in loc (nil means UTC): spend starts over at every full
// hour of loc's clock, and at every change of loc's offset.
func Hourly(loc *time.Location) Window { return Window{kind: hourly, loc: loc} }

// Daily returns calendar days in loc (nil means UTC): spend starts over at midnight in
// loc, so a day across a daylight-saving change is 23 or 25 hours long. A day whose
// midnight the clock skips (daylight saving time beginning at midnight) starts when its
// clock starts; one whose midnight shows twice starts at the first.
func Daily(loc *time.Location) Window { return Window{kind: daily, loc: loc} }

// Monthly returns calendar months in loc (nil means UTC): spend starts over at midnight of
// the first of each month in loc (the first instant of that day, as for Daily).
func Monthly(loc *time.Location) Window { return Window{kind: monthly, loc: loc} }

// Rolling returns a window of the last d, counted in Slices slices of d/60: a slice's
// spend leaves the window as a whole once d has passed since the slice ended. d must lie
// in [MinRolling, MaxRolling]; budgets that use another d are rejected by Validate, and
// PeriodAt and SliceEnd count such a window as one of the nearest bound.
func Rolling(d time.Duration) Window { return Window{kind: rolling, length: d} }

// IsRolling reports whether w is a rolling window.
func (w Window) IsRolling() bool { return w.kind == rolling }

// Length returns a rolling window's length, 0 for a calendar window.
func (w Window) Length() time.Duration {
	if w.kind == rolling {
		return w.length
	}
	return 0
}

// Location returns a calendar window's time zone (UTC when none was given); nil for a
// rolling window.
func (w Window) Location() *time.Location {
	if w.kind == rolling {
		return nil
	}
	if w.loc == nil {
		return time.UTC
	}
	return w.loc
}

// String names the window: "daily in UTC", "hourly in Europe/Paris", "rolling 1h0m0s".
func (w Window) String() string {
	switch w.kind {
	case hourly:
		return "hourly in " + w.Location().String()
	case monthly:
		return "monthly in " + w.Location().String()
	case rolling:
		return "rolling " + w.length.String()
	}
	return "daily in " + w.Location().String()
}

// sliceLength is a rolling window's slice, its length clamped to [MinRolling, MaxRolling].
func (w Window) sliceLength() time.Duration {
	return min(max(w.length, MinRolling), MaxRolling) / Slices
}

func (w Window) validate() error {
	if w.kind == rolling && (w.length < MinRolling || w.length > MaxRolling) {
		return fmt.Errorf("rolling window %v is outside [%v, %v]", w.length, MinRolling, MaxRolling)
	}
	return nil
}

// Period is where a moment falls in a window, as the budget's store counts it.
//
// A calendar window is one slice: Slice is the window's start in Unix seconds and Oldest
// equals Slice. A rolling window is Slices slices: Slice numbers the slice of the moment
// (Unix nanoseconds divided by the slice length) and Oldest is the oldest slice still in
// the window, Slice - 59. Epoch changes once per window (a calendar window's start, or
// every Slices slices of a rolling window): soft thresholds fire at most once per epoch.
type Period struct {
	Slice, Oldest, Epoch int64
	// Start and End bound the calendar window; for a rolling window, Start is where the
	// window's oldest slice begins and End where the current slice ends.
	Start, End time.Time
}

// PeriodAt returns the period of t in w. The zero time has the period of the zero time.
func (w Window) PeriodAt(t time.Time) Period {
	if w.kind == rolling {
		slice := w.sliceLength()
		n := t.UnixNano() // the Unix epoch divides the time line into slices
		id := floorDiv(n, int64(slice))
		oldest := id - (Slices - 1)
		return Period{
			Slice: id, Oldest: oldest, Epoch: floorDiv(id, Slices),
			Start: time.Unix(0, oldest*int64(slice)), End: time.Unix(0, (id+1)*int64(slice)),
		}
	}
	loc := w.Location()
	l := t.In(loc)
	var start, end time.Time
	switch w.kind {
	case hourly:
		// Whole hours of loc's wall clock at the offset in force at t, so hours stay
		// aligned in zones whose offset is not a whole number of hours (India, Nepal); the
		// hour repeated when daylight saving time ends is two windows. An offset change
		// that is not a whole hour (Lord Howe Island) cuts the hour it falls in: the window
		// ends, and the next one starts, at the change.
		_, off := l.Zone()
		local := t.Unix() + int64(off)
		start = time.Unix(floorDiv(local, 3600)*3600-int64(off), 0).In(loc)
		end = start.Add(time.Hour)
		zs, ze := l.ZoneBounds()
		if !zs.IsZero() && start.Before(zs) {
			start = zs
		}
		if !ze.IsZero() && end.After(ze) {
			end = ze
		}
	case monthly:
		y, m, _ := l.Date()
		start, end = midnight(loc, y, m, 1), midnight(loc, y, m+1, 1)
		if !end.After(t) { // the wall clock went back across the month's end
			start, end = end, midnight(loc, y, m+2, 1)
		}
	default:
		y, m, d := l.Date()
		start, end = midnight(loc, y, m, d), midnight(loc, y, m, d+1)
		if !end.After(t) { // the wall clock went back across midnight
			start, end = end, midnight(loc, y, m, d+2)
		}
	}
	// A safety net: keep t inside [start, end) whatever the zone's rules.
	if start.After(t) {
		start = t
	}
	if !end.After(t) {
		end = t.Add(time.Second)
	}
	id := start.Unix()
	return Period{Slice: id, Oldest: id, Epoch: id, Start: start, End: end}
}

// midnight returns when the day y-m-d (normalized as time.Date does) begins in loc: the
// first instant whose wall clock reads its midnight or later. time.Date alone does not
// say: when daylight saving time begins at midnight (Havana, Santiago, the Azores) the
// day's midnight never shows, and time.Date may return an instant of the day before;
// when it ends at one in the morning (Havana) midnight shows twice, and time.Date may
// return the second.
func midnight(loc *time.Location, y int, m time.Month, d int) time.Time {
	c := time.Date(y, m, d, 0, 0, 0, 0, loc)
	// wall is the midnight's wall-clock seconds; reads(u) is u's wall clock in loc.
	wall := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix()
	reads := func(u time.Time) int64 {
		_, off := u.Zone()
		return u.Unix() + int64(off)
	}
	zs, ze := c.ZoneBounds()
	best, found := c, reads(c) == wall
	// The same wall time in the zone before c's: a midnight that shows twice.
	if !zs.IsZero() {
		_, off := zs.Add(-time.Second).Zone()
		if u := time.Unix(wall-int64(off), 0).In(loc); u.Before(zs) && reads(u) == wall && (!found || u.Before(best)) {
			best, found = u, true
		}
	}
	if found {
		return best
	}
	// Midnight falls in a gap: the day begins when the gap ends, at the edge of c's zone
	// on the side of midnight.
	if reads(c) < wall && !ze.IsZero() {
		return ze
	}
	if !zs.IsZero() {
		return zs
	}
	return c
}

// SliceEnd returns when slice id of w's period leaves the window: for a rolling window,
// Slices slice lengths after the slice began; for a calendar window, p.End.
func (w Window) SliceEnd(p Period, id int64) time.Time {
	if w.kind != rolling {
		return p.End
	}
	slice := int64(w.sliceLength())
	return time.Unix(0, satMul(id+Slices, slice))
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// satMul multiplies two int64 values, saturating at the int64 bounds.
func satMul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	c := a * b
	if c/b != a {
		if (a < 0) != (b < 0) {
			return -1 << 63
		}
		return 1<<63 - 1
	}
	return c
}
