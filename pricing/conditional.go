package pricing

import "time"

// conditionKind says when a conditional price applies.
type conditionKind uint8

const (
	always    conditionKind = iota // no constraint
	fromDate                       // start_date: from midnight UTC of a date on
	timeOfDay                      // time_of_date: a daily window [start, end) in UTC
)

const nanosPerDay = int64(24 * time.Hour)

// conditional is one entry of a model's price list.
type conditional struct {
	kind conditionKind
	// from is the Unix second a start_date price begins.
	from int64
	// start and end bound a time_of_date window, in nanoseconds after midnight UTC; a window
	// with end < start spans midnight, one with end == start is never active (as in
	// genai-prices).
	start, end int64
	price      price
}

func (c *conditional) activeAt(at time.Time) bool {
	switch c.kind {
	case fromDate:
		// Unix rounds toward the past, and from is a whole second: exact.
		return at.Unix() >= c.from
	case timeOfDay:
		ns := nanosOfDay(at)
		if c.end < c.start {
			return ns >= c.start || ns < c.end
		}
		return ns >= c.start && ns < c.end
	}
	return true
}

// nanosOfDay returns the time of day of at in UTC, in nanoseconds after midnight.
func nanosOfDay(at time.Time) int64 {
	s := at.Unix() % 86400
	if s < 0 {
		s += 86400
	}
	return s*int64(time.Second) + int64(at.Nanosecond())
}
