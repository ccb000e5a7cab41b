package adapter

import (
	"math"
	"testing"
)

func TestAddTokens(t *testing.T) {
	for _, tc := range []struct{ a, b, want int }{
		{0, 0, 0},
		{12, 2000, 2012},
		{-5, 7, 7},
		{7, -5, 7},
		{math.MinInt, math.MinInt, 0},
		{math.MaxInt, 1, math.MaxInt},
		{math.MaxInt, math.MaxInt, math.MaxInt},
		{math.MaxInt - 1, 1, math.MaxInt},
	} {
		if got := AddTokens(tc.a, tc.b); got != tc.want {
			t.Errorf("AddTokens(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestSumCounts(t *testing.T) {
	for _, tc := range []struct{ a, b, want int }{
		{0, 0, 0},
		{12, 2000, 2012},
		{-5, 7, -1},
		{7, -1, -1},
		{math.MinInt, 1, -1},
		{math.MaxInt, 1, math.MaxInt},
	} {
		if got := SumCounts(tc.a, tc.b); got != tc.want {
			t.Errorf("SumCounts(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
