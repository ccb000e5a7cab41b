package pricing

import (
	"errors"
	"fmt"
	"time"
)

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

// parseConstraint reads {"type": "start_date", "start_date": "2025-06-10"} or
// {"type": "time_of_date", "start_time": "00:30:00Z", "end_time": "16:30:00Z"}; "type" may
// be left out, as the data's engine allows. No constraint means always.
func parseConstraint(v any) (conditional, error) {
	if v == nil {
		return conditional{kind: always}, nil
	}
	obj, err := object(v)
	if err != nil {
		return conditional{}, err
	}
	keys := len(obj)
	typ, hasType := obj["type"]
	if hasType {
		keys--
		if _, ok := typ.(string); !ok {
			return conditional{}, errors.New("type: want a string")
		}
	}
	_, hasDate := obj["start_date"]
	_, hasStart := obj["start_time"]
	_, hasEnd := obj["end_time"]
	switch {
	case (typ == "start_date" || !hasType) && keys == 1 && hasDate:
		s, ok := obj["start_date"].(string)
		d, err := time.Parse(time.DateOnly, s)
		if !ok || err != nil || d.Year() < 1 {
			return conditional{}, fmt.Errorf("start_date: want a date YYYY-MM-DD, got %s", snippet(obj["start_date"]))
		}
		return conditional{kind: fromDate, from: d.Unix()}, nil
	case (typ == "time_of_date" || !hasType) && keys == 2 && hasStart && hasEnd:
		c := conditional{kind: timeOfDay}
		for _, f := range []struct {
			key string
			dst *int64
		}{{"start_time", &c.start}, {"end_time", &c.end}} {
			s, _ := obj[f.key].(string)
			ns, err := parseTimeOfDay(s)
			if err != nil {
				return conditional{}, fmt.Errorf("%s: %w", f.key, err)
			}
			*f.dst = ns
		}
		return c, nil
	}
	return conditional{}, fmt.Errorf("want a start_date or a time_of_date constraint, got %s", snippet(v))
}

// parseTimeOfDay reads HH:MM:SS[.fraction] followed by Z or an offset ±HH:MM, and returns
// the time in UTC as nanoseconds after midnight.
func parseTimeOfDay(s string) (int64, error) {
	bad := fmt.Errorf("want HH:MM:SS with Z or a ±HH:MM offset, got %q", s)
	two := func(i int) (int64, bool) {
		if i+2 > len(s) || !isDigit(s[i]) || !isDigit(s[i+1]) {
			return 0, false
		}
		return int64(s[i]-'0')*10 + int64(s[i+1]-'0'), true
	}
	h, ok1 := two(0)
	m, ok2 := two(3)
	sec, ok3 := two(6)
	if !ok1 || !ok2 || !ok3 || s[2] != ':' || s[5] != ':' || h > 23 || m > 59 || sec > 59 {
		return 0, bad
	}
	ns := (h*3600 + m*60 + sec) * int64(time.Second)
	i := 8
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		scale := int64(time.Second)
		for i < len(s) && isDigit(s[i]) {
			if scale /= 10; scale > 0 {
				ns += int64(s[i]-'0') * scale
			}
			i++
		}
		if i == start {
			return 0, bad
		}
	}
	switch rest := s[i:]; {
	case rest == "Z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, ok1 := two(i + 1)
		om, ok2 := two(i + 4)
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return 0, bad
		}
		off := (oh*3600 + om*60) * int64(time.Second)
		if rest[0] == '+' {
			off = -off
		}
		ns = ((ns+off)%nanosPerDay + nanosPerDay) % nanosPerDay
	default:
		return 0, bad
	}
	return ns, nil
}
