package pricing

import (
	"errors"
	"math"
)

// parseDecimal returns the JSON number s times 10^scale as an integer, rounded half away
// from zero when s has more decimals than scale, and whether the result is exact. It
// parses the text itself, never through float64, so a price such as 0.003625 is exact.
// It fails on anything but a JSON number, on a negative number and on a result above max.
func parseDecimal(s string, scale int, max int64) (v int64, exact bool, err error) {
	i := 0
	neg := false
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}
	start := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	intPart := s[start:i]
	if intPart == "" || (len(intPart) > 1 && intPart[0] == '0') {
		return 0, false, errors.New("not a JSON number")
	}
	var frac string
	if i < len(s) && s[i] == '.' {
		i++
		start = i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		frac = s[start:i]
		if frac == "" {
			return 0, false, errors.New("not a JSON number")
		}
	}
	exp := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		expNeg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			expNeg = s[i] == '-'
			i++
		}
		start = i
		for i < len(s) && isDigit(s[i]) {
			if exp < 1_000_000 { // beyond this, every mantissa overflows or rounds to zero
				exp = exp*10 + int(s[i]-'0')
			}
			i++
		}
		if i == start {
			return 0, false, errors.New("not a JSON number")
		}
		if expNeg {
			exp = -exp
		}
	}
	if i != len(s) {
		return 0, false, errors.New("not a JSON number")
	}

	digits := trimLeadingZeros(intPart + frac)
	if digits == "" {
		return 0, true, nil // zero, also "-0"
	}
	if neg {
		return 0, false, errors.New("negative")
	}
	shift := exp - len(frac) + scale // the value is digits × 10^shift
	exact = true
	if shift < 0 {
		drop := -shift
		if drop > len(digits) {
			return 0, false, nil // below half a unit
		}
		kept, dropped := digits[:len(digits)-drop], digits[len(digits)-drop:]
		for j := 0; j < len(dropped); j++ {
			if dropped[j] != '0' {
				exact = false
			}
		}
		v, ok := digitsValue(kept, max)
		if !ok {
			return 0, false, errors.New("too large")
		}
		if dropped[0] >= '5' {
			if v == max {
				return 0, false, errors.New("too large")
			}
			v++
		}
		return v, exact, nil
	}
	if len(digits)+shift > 19 {
		return 0, false, errors.New("too large")
	}
	v, ok := digitsValue(digits, max)
	for ; ok && shift > 0; shift-- {
		if v > max/10 {
			ok = false
		}
		v *= 10
	}
	if !ok || v > max {
		return 0, false, errors.New("too large")
	}
	return v, true, nil
}

// digitsValue parses decimal digits, failing above max.
func digitsValue(d string, max int64) (int64, bool) {
	var v int64
	for i := 0; i < len(d); i++ {
		c := int64(d[i] - '0')
		if v > (math.MaxInt64-c)/10 {
			return 0, false
		}
		v = v*10 + c
	}
	return v, v <= max
}

func trimLeadingZeros(d string) string {
	for len(d) > 0 && d[0] == '0' {
		d = d[1:]
	}
	return d
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
