package pricing_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient/pricing"
)

var planDay = time.Date(2025, 9, 1, 0, 0, 0, 0, time.UTC)

func TestPlanTimeOfDayWeighted(t *testing.T) {
	// deepseek-chat: standard $0.000955 a call from 00:30 to 16:30 UTC (16 hours), off-peak
	// $0.0004775 the other 8: the mean is (16 × 0.000955 + 8 × 0.0004775) / 24.
	m := lookup(t, "deepseek", "deepseek-chat")
	est, err := pricing.Plan(pricing.Workload{
		CallsPerDay: 10_000,
		PerCall:     pricing.Tokens{Input: 1500, Output: 500},
		Mix:         []pricing.Share{{Model: m, Fraction: 1}},
		Day:         planDay.Add(15 * time.Hour), // the time of day does not matter
	})
	require.NoError(t, err)
	require.Len(t, est.Lines, 1)
	assert.Equal(t, usd("0.000795833333"), est.Lines[0].PerCall)
	assert.Equal(t, usd("7.958333333333"), est.Daily)
	assert.Equal(t, usd("238.74999999999"), est.Monthly)
}

func TestPlanStartDate(t *testing.T) {
	// openai o3 drops from $10/$40 to $2/$8 on 2025-06-10.
	o3 := lookup(t, "openai", "o3")
	w := pricing.Workload{CallsPerDay: 100, PerCall: pricing.Tokens{Input: 1000, Output: 1000}, Mix: []pricing.Share{{Model: o3, Fraction: 1}}}
	w.Day = time.Date(2025, 6, 9, 23, 0, 0, 0, time.UTC)
	before, err := pricing.Plan(w)
	require.NoError(t, err)
	w.Day = time.Date(2025, 6, 10, 0, 0, 0, 0, time.UTC)
	after, err := pricing.Plan(w)
	require.NoError(t, err)
	assert.Equal(t, usd("5"), before.Daily)
	assert.Equal(t, usd("1"), after.Daily)
}

func TestPlanThirds(t *testing.T) {
	m := lookup(t, "openai", "gpt-4o-mini") // $0.000525 a call
	third := 1.0 / 3
	est, err := pricing.Plan(pricing.Workload{
		CallsPerDay: 3,
		PerCall:     pricing.Tokens{Input: 1500, Output: 500},
		Mix:         []pricing.Share{{Model: m, Fraction: third}, {Model: m, Fraction: third}, {Model: m, Fraction: third}},
		Day:         planDay,
	})
	require.NoError(t, err, "fractions that sum to 1 within float error")
	for _, l := range est.Lines {
		assert.Equal(t, usd("0.000525"), l.Daily, "one call each, exactly")
	}
	assert.Equal(t, usd("0.001575"), est.Daily)
}

func TestPlanZeroAndHuge(t *testing.T) {
	m := lookup(t, "openai", "gpt-4o-mini")
	w := pricing.Workload{PerCall: pricing.Tokens{Input: 1500, Output: 500}, Mix: []pricing.Share{{Model: m, Fraction: 1}}, Day: planDay}
	est, err := pricing.Plan(w)
	require.NoError(t, err)
	assert.Equal(t, pricing.Money(0), est.Monthly, "no calls")

	w.CallsPerDay = math.MaxInt
	_, err = pricing.Plan(w)
	assert.ErrorContains(t, err, "exceeds")

	w.CallsPerDay = 1
	w.PerCall = pricing.Tokens{Input: math.MaxInt} // saturates at MaxMoney a call
	_, err = pricing.Plan(w)
	assert.ErrorContains(t, err, "exceeds")
}

func TestPlanRejects(t *testing.T) {
	m := lookup(t, "openai", "gpt-4o-mini")
	whisper := lookup(t, "openai", "whisper-1")
	good := func() pricing.Workload {
		return pricing.Workload{CallsPerDay: 10, PerCall: pricing.Tokens{Input: 10, Output: 10}, Mix: []pricing.Share{{Model: m, Fraction: 1}}, Day: planDay}
	}
	cases := []struct {
		name   string
		change func(*pricing.Workload)
		want   string
	}{
		{"negative calls", func(w *pricing.Workload) { w.CallsPerDay = -1 }, "CallsPerDay -1"},
		{"MinInt calls", func(w *pricing.Workload) { w.CallsPerDay = math.MinInt }, "is negative"},
		{"bad tokens", func(w *pricing.Workload) { w.PerCall.Reasoning = 11 }, "reasoning 11 exceeds output 10"},
		{"no day", func(w *pricing.Workload) { w.Day = time.Time{} }, "Day is required"},
		{"no mix", func(w *pricing.Workload) { w.Mix = nil }, "Mix is empty"},
		{"nil model", func(w *pricing.Workload) { w.Mix[0].Model = nil }, "Mix[0].Model is nil"},
		{"NaN", func(w *pricing.Workload) { w.Mix[0].Fraction = math.NaN() }, "not in [0, 1]"},
		{"Inf", func(w *pricing.Workload) { w.Mix[0].Fraction = math.Inf(1) }, "not in [0, 1]"},
		{"negative share", func(w *pricing.Workload) {
			w.Mix = []pricing.Share{{Model: m, Fraction: 1.5}, {Model: m, Fraction: -0.5}}
		}, "not in [0, 1]"},
		{"sum below 1", func(w *pricing.Workload) {
			w.Mix = []pricing.Share{{Model: m, Fraction: 0.7}, {Model: m, Fraction: 0.2}}
		}, "sum to 0.9"},
		{"sum above 1", func(w *pricing.Workload) {
			w.Mix = []pricing.Share{{Model: m, Fraction: 0.7}, {Model: m, Fraction: 0.4}}
		}, "sum to 1.1"},
		{"all zero", func(w *pricing.Workload) { w.Mix[0].Fraction = 0 }, "sum to 0"},
		{"not per token", func(w *pricing.Workload) { w.Mix[0].Model = whisper }, "not priced per token"},
	}
	for _, c := range cases {
		w := good()
		c.change(&w)
		est, err := pricing.Plan(w)
		assert.ErrorContains(t, err, c.want, c.name)
		assert.Zero(t, est.Daily, c.name)
	}
}
