package headers

import "time"

// ParseDuration parses the reset durations OpenAI-style vendors send in x-ratelimit-reset-*
// headers: Go-style durations ("6m0s", "1s", "12ms", "1h2m3.5s", "0.5s", "250us", "10ns")
// and bare seconds ("20", "0.5"). Surrounding blanks are ignored. Signs, exponents, unknown
// units and garbage report false; values too large saturate at the largest time.Duration.
func ParseDuration(s string) (time.Duration, bool) {
	s = trimSpace(s)
	if s == "" {
		return 0, false
	}
	if d, ok := parseDecimal(s, time.Second); ok {
		return d, true
	}
	d, n, ok := scanGoDuration(s)
	if !ok || n != len(s) {
		return 0, false
	}
	return d, true
}

// scanGoDuration reads a Go-style duration (one or more number+unit pairs, no sign) at the
// start of s and returns it with the number of bytes consumed.
func scanGoDuration(s string) (d time.Duration, n int, ok bool) {
	for n < len(s) && (isDigit(s[n]) || s[n] == '.') {
		unitStart := n
		// Find the unit first, then scale the number by it.
		j := n
		for j < len(s) && (isDigit(s[j]) || s[j] == '.') {
			j++
		}
		unit, ul := goUnit(s[j:])
		if ul == 0 {
			break
		}
		v, m, vok := scanDecimal(s[unitStart:j], unit)
		if !vok || m != j-unitStart {
			return 0, 0, false
		}
		d = addSat(d, v)
		n = j + ul
		ok = true
	}
	return d, n, ok
}

// goUnit reads a time.ParseDuration unit at the start of s.
func goUnit(s string) (time.Duration, int) {
	switch {
	case hasPrefixFold(s, "ns"):
		return time.Nanosecond, 2
	case hasPrefixFold(s, "us"):
		return time.Microsecond, 2
	case len(s) >= 3 && s[:3] == "µs": // U+00B5 is two bytes
		return time.Microsecond, 3
	case len(s) >= 3 && s[:3] == "μs": // U+03BC is two bytes
		return time.Microsecond, 3
	case hasPrefixFold(s, "ms"):
		return time.Millisecond, 2
	case hasPrefixFold(s, "s"):
		return time.Second, 1
	case hasPrefixFold(s, "m"):
		return time.Minute, 1
	case hasPrefixFold(s, "h"):
		return time.Hour, 1
	}
	return 0, 0
}

// ParseReset parses a quota reset: any ParseDuration form, an RFC 3339 timestamp (Anthropic's
// anthropic-ratelimit-*-reset), or a bare integer Unix time in seconds (>= 1e9) or
// milliseconds (>= 1e12), as some OpenAI-compatible gateways send. Timestamps are returned
// relative to now and clamped at 0 when already past.
func ParseReset(s string, now time.Time) (time.Duration, bool) {
	s = trimSpace(s)
	if s == "" {
		return 0, false
	}
	if isAllDigits(s) && len(s) <= 18 {
		if d, ok := fromUnix(s, now); ok {
			return d, true
		}
	}
	if d, ok := ParseDuration(s); ok {
		return d, true
	}
	if len(s) < len("2006-01-02T15:04:05Z") || !isDigit(s[0]) {
		return 0, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, false
	}
	return until(t, now), true
}

// fromUnix reads an all-digit string of at most 18 digits as a Unix time in seconds or
// milliseconds; ok is false below 1e9, which is a plain number of seconds.
func fromUnix(s string, now time.Time) (time.Duration, bool) {
	var v int64
	for i := 0; i < len(s); i++ {
		v = v*10 + int64(s[i]-'0')
	}
	if v < 1e9 {
		return 0, false
	}
	var t time.Time
	if v >= 1e12 {
		t = time.UnixMilli(v)
	} else {
		t = time.Unix(v, 0)
	}
	return until(t, now), true
}

// until is t-now clamped at 0, saturating on overflow.
func until(t, now time.Time) time.Duration {
	if !t.After(now) {
		return 0
	}
	return t.Sub(now) // Sub saturates at the largest Duration
}

func isAllDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}
