package headers

import (
	"math"
	"time"
)

// maxDuration is where every parser saturates instead of overflowing.
const maxDuration = time.Duration(math.MaxInt64)

// scanDecimal reads an unsigned decimal number at the start of s ("12", "1.5", ".5", "3.")
// and returns it scaled by unit, with the number of bytes consumed. unit must be a power of
// ten nanoseconds times a small factor (ns, us, ms, s, min, h); fraction digits finer than a
// nanosecond are dropped. The value saturates at maxDuration. ok is false when s does not
// start with a digit or "." followed by a digit.
func scanDecimal(s string, unit time.Duration) (d time.Duration, n int, ok bool) {
	var whole uint64
	overflow := false
	i := 0
	for ; i < len(s) && isDigit(s[i]); i++ {
		if !overflow {
			if whole > (math.MaxUint64-9)/10 {
				overflow = true
			} else {
				whole = whole*10 + uint64(s[i]-'0')
			}
		}
	}
	digits := i
	frac := time.Duration(0)
	if i < len(s) && s[i] == '.' {
		j := i + 1
		scale := unit
		for ; j < len(s) && isDigit(s[j]); j++ {
			scale /= 10
			frac += time.Duration(s[j]-'0') * scale
		}
		if digits == 0 && j == i+1 {
			return 0, 0, false // a lone "."
		}
		digits += j - i - 1
		i = j
	}
	if digits == 0 {
		return 0, 0, false
	}
	if overflow || whole > uint64(maxDuration/unit) {
		return maxDuration, i, true
	}
	d = time.Duration(whole) * unit
	return addSat(d, frac), i, true
}

// addSat adds two non-negative durations, saturating at maxDuration.
func addSat(a, b time.Duration) time.Duration {
	if a > maxDuration-b {
		return maxDuration
	}
	return a + b
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isSpace(c byte) bool { return c == ' ' || c == '\t' }

// trimSpace trims ASCII spaces and tabs, the only whitespace header values carry.
func trimSpace(s string) string {
	for len(s) > 0 && isSpace(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// parseDecimal parses the whole of s (after trimming) as an unsigned decimal in unit.
func parseDecimal(s string, unit time.Duration) (time.Duration, bool) {
	s = trimSpace(s)
	d, n, ok := scanDecimal(s, unit)
	if !ok || n != len(s) {
		return 0, false
	}
	return d, true
}
