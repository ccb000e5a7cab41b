package pricing_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/llmclient/llmclient/pricing"
)

func TestMoneyString(t *testing.T) {
	cases := []struct {
		m    pricing.Money
		want string
	}{
		{0, "$0.00"},
		{pricing.Picodollar, "$0.000000000001"},
		{123 * pricing.Microdollar, "$0.000123"},
		{150 * pricing.Cent, "$1.50"},
		{39_675 * pricing.Dollar / 1000, "$39.675"},
		{1190*pricing.Dollar + 25*pricing.Cent, "$1190.25"},
		{-225 * pricing.Cent, "-$2.25"},
		{pricing.MaxMoney, "$9223372.036854775807"},
		{math.MinInt64, "-$9223372.036854775808"},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, c.m.String(), "%d", int64(c.m))
	}
}

func TestMoneySaturates(t *testing.T) {
	cases := []struct {
		name string
		got  pricing.Money
		want pricing.Money
	}{
		{"add", pricing.Dollar.Add(pricing.Cent), pricing.Dollar + pricing.Cent},
		{"add over max", pricing.MaxMoney.Add(1), pricing.MaxMoney},
		{"add max+max", pricing.MaxMoney.Add(pricing.MaxMoney), pricing.MaxMoney},
		{"add under -max", (-pricing.MaxMoney).Add(-1), -pricing.MaxMoney},
		{"add MinInt64", pricing.Money(math.MinInt64).Add(0), -pricing.MaxMoney},
		{"sub", pricing.Dollar.Sub(pricing.Cent), pricing.Dollar - pricing.Cent},
		{"sub below -max", (-pricing.MaxMoney).Sub(pricing.Dollar), -pricing.MaxMoney},
		{"sub MinInt64", pricing.Money(0).Sub(math.MinInt64), pricing.MaxMoney},
		{"sub -max from max", pricing.MaxMoney.Sub(-pricing.MaxMoney), pricing.MaxMoney},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, c.got, c.name)
	}
	assert.Equal(t, 1.5, (150 * pricing.Cent).Dollars())
}

// TestMoneyNoDrift adds a price a million times: float64 dollars drift, Money does not.
func TestMoneyNoDrift(t *testing.T) {
	var m pricing.Money
	var f float64
	for range 1_000_000 {
		m = m.Add(525 * pricing.Microdollar) // $0.000525
		f += 0.000525
	}
	assert.Equal(t, "$525.00", m.String())
	assert.NotEqual(t, 525.0, f, "float64 sums drift; if this ever holds, the test shows nothing")
}
