package pricing

import (
	"math"
	"math/bits"
	"strconv"
)

// Money is an amount of US dollars in picodollars (1e-12 USD), an exact integer: adding the
// cost of millions of calls never drifts the way float64 sums do.
//
// One picodollar per token is the resolution of a price of $0.000001 per million tokens, so
// every rate written with at most six decimals (all but six rates of the shipped data, see
// the package documentation) is exact. The largest amount is MaxMoney, about $9.22 million;
// Add, Sub and every cost computation saturate at MaxMoney (and at -MaxMoney below) instead
// of overflowing. The zero value is $0.
type Money int64

// Units of Money.
const (
	Picodollar  Money = 1
	Microdollar Money = 1_000_000
	Cent        Money = 10_000_000_000
	Dollar      Money = 1_000_000_000_000
)

// MaxMoney is the largest amount Money holds: $9,223,372.036854775807. Results that would be
// larger saturate at MaxMoney.
const MaxMoney Money = math.MaxInt64

// Add returns m + n, saturated to [-MaxMoney, MaxMoney].
func (m Money) Add(n Money) Money {
	s := m + n
	switch {
	case n > 0 && s < m:
		return MaxMoney
	case n < 0 && s > m:
		return -MaxMoney
	case s < -MaxMoney: // math.MinInt64
		return -MaxMoney
	}
	return s
}

// Sub returns m - n, saturated to [-MaxMoney, MaxMoney].
func (m Money) Sub(n Money) Money {
	if n == math.MinInt64 {
		return m.Add(MaxMoney).Add(1)
	}
	return m.Add(-n)
}

// Dollars returns m in US dollars as a float64, for display and metrics only: it rounds
// amounts above $9,007 (2^53 picodollars) to the nearest representable float.
func (m Money) Dollars() float64 { return float64(m) / float64(Dollar) }

// String formats m in dollars with at least two and at most twelve decimals and no trailing
// zeros beyond the second: "$0.00", "$1.50", "$0.000123", "-$2.25".
func (m Money) String() string {
	var buf [32]byte
	b := buf[:0]
	u := uint64(m)
	if m < 0 {
		b = append(b, '-')
		u = -u // two's complement magnitude; exact for math.MinInt64 too
	}
	b = append(b, '$')
	b = strconv.AppendUint(b, u/uint64(Dollar), 10)
	frac := u % uint64(Dollar)
	var digits [12]byte
	for i := 11; i >= 0; i-- {
		digits[i] = byte('0' + frac%10)
		frac /= 10
	}
	n := 12
	for n > 2 && digits[n-1] == '0' {
		n--
	}
	b = append(b, '.')
	b = append(b, digits[:n]...)
	return string(b)
}

// mulTokens returns tokens × perToken, saturated at MaxMoney. Both are non-negative.
func mulTokens(tokens int, perToken Money) Money {
	hi, lo := bits.Mul64(uint64(tokens), uint64(perToken))
	if hi != 0 || lo > math.MaxInt64 {
		return MaxMoney
	}
	return Money(lo)
}

// addCost returns a + b for non-negative amounts, saturated at MaxMoney.
func addCost(a, b Money) Money {
	if s := a + b; s >= a {
		return s
	}
	return MaxMoney
}
