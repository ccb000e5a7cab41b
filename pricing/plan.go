package pricing

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"time"
)

// DaysPerMonth is the month Plan uses: Monthly = 30 × Daily.
const DaysPerMonth = 30

// Workload describes traffic to estimate: how many calls a day, the tokens of an average
// call, and how the calls split between models.
type Workload struct {
	// CallsPerDay is the number of calls a day; 0 costs nothing, negative is an error.
	CallsPerDay int
	// PerCall is an average call's tokens (parts included in totals, as for Cost).
	PerCall Tokens
	// Mix splits the calls between models; the fractions must sum to 1 (within 1e-9).
	Mix []Share
	// Day selects the prices: those in force on its UTC date (start dates), with the calls
	// spread evenly over the 24 hours of that date (time-of-day prices are weighted by the
	// hours they cover). Required.
	Day time.Time
}

// Share is the fraction of a workload's calls that go to one model.
type Share struct {
	Model    *Model
	Fraction float64
}

// Estimate is the expected cost of a Workload.
type Estimate struct {
	// Daily is the sum of the lines' Daily costs; Monthly is DaysPerMonth × Daily.
	Daily, Monthly Money
	// Lines has one entry per Share, in the order of Workload.Mix.
	Lines []Line
}

// Line is one model's part of an Estimate.
type Line struct {
	Model    *Model
	Fraction float64
	// PerCall is the cost of one average call, averaged over the day.
	PerCall Money
	// Daily is the cost of the model's share of a day's calls; Monthly is DaysPerMonth ×
	// Daily.
	Daily, Monthly Money
}

// Plan estimates the daily and monthly cost of a workload with each model's Cost. The
// arithmetic is exact (rational), and each line's PerCall and Daily are rounded once to the
// nearest picodollar, half up. Plan fails on a negative CallsPerDay, invalid tokens, an
// empty mix, a nil model, a fraction that is negative, above 1 or not a number, fractions
// that do not sum to 1, a zero Day, a model not priced per token, and an estimate above
// MaxMoney.
func Plan(w Workload) (Estimate, error) {
	if w.CallsPerDay < 0 {
		return Estimate{}, fmt.Errorf("pricing: Plan: CallsPerDay %d is negative", w.CallsPerDay)
	}
	if err := w.PerCall.validate(); err != nil {
		return Estimate{}, fmt.Errorf("pricing: Plan: PerCall: %w", err)
	}
	if w.Day.IsZero() {
		return Estimate{}, errors.New("pricing: Plan: Day is required (prices change with the date)")
	}
	if len(w.Mix) == 0 {
		return Estimate{}, errors.New("pricing: Plan: Mix is empty")
	}
	fractions := make([]*big.Rat, len(w.Mix))
	sum := new(big.Rat)
	for i, s := range w.Mix {
		if s.Model == nil {
			return Estimate{}, fmt.Errorf("pricing: Plan: Mix[%d].Model is nil", i)
		}
		f := s.Fraction
		if math.IsNaN(f) || f < 0 || f > 1 {
			return Estimate{}, fmt.Errorf("pricing: Plan: Mix[%d] (%s): Fraction %v is not in [0, 1]", i, s.Model, f)
		}
		// The shortest decimal that prints as f: 0.7 is 7/10, not the binary float near it.
		fractions[i], _ = new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
		sum.Add(sum, fractions[i])
	}
	if d, _ := new(big.Rat).Sub(sum, big.NewRat(1, 1)).Float64(); math.Abs(d) > 1e-9 {
		return Estimate{}, fmt.Errorf("pricing: Plan: the Mix fractions sum to %s, not 1", sum.FloatString(12))
	}
	day := time.Date(w.Day.UTC().Year(), w.Day.UTC().Month(), w.Day.UTC().Day(), 0, 0, 0, 0, time.UTC)
	calls := new(big.Rat).SetInt64(int64(w.CallsPerDay))
	est := Estimate{Lines: make([]Line, len(w.Mix))}
	for i, s := range w.Mix {
		mean, err := meanCost(s.Model, w.PerCall, day)
		if err != nil {
			return Estimate{}, fmt.Errorf("pricing: Plan: Mix[%d] (%s): %w", i, s.Model, err)
		}
		// daily = mean × calls × fraction / sum (the fractions, normalized exactly)
		daily := new(big.Rat).Mul(mean, calls)
		daily.Mul(daily, fractions[i])
		daily.Quo(daily, sum)
		line := Line{Model: s.Model, Fraction: s.Fraction}
		var ok1, ok2, ok3 bool
		line.PerCall, ok1 = roundMoney(mean)
		line.Daily, ok2 = roundMoney(daily)
		line.Monthly, ok3 = mulMoney(line.Daily, DaysPerMonth)
		if !ok1 || !ok2 || !ok3 {
			return Estimate{}, fmt.Errorf("pricing: Plan: Mix[%d] (%s): the estimate exceeds %v", i, s.Model, MaxMoney)
		}
		est.Lines[i] = line
		if est.Daily > MaxMoney-line.Daily {
			return Estimate{}, fmt.Errorf("pricing: Plan: the estimate exceeds %v", MaxMoney)
		}
		est.Daily += line.Daily
	}
	var ok bool
	if est.Monthly, ok = mulMoney(est.Daily, DaysPerMonth); !ok {
		return Estimate{}, fmt.Errorf("pricing: Plan: the monthly estimate exceeds %v", MaxMoney)
	}
	return est, nil
}

// meanCost returns the cost of one call with tokens t averaged over the UTC day that starts
// at day, weighting each price by the part of the day it is active.
func meanCost(m *Model, t Tokens, day time.Time) (*big.Rat, error) {
	// Prices can change only at the edges of time-of-day windows (start dates fall on
	// midnight UTC), so the price is constant between consecutive edges.
	edges := []int64{0, nanosPerDay}
	for _, c := range m.prices {
		if c.kind == timeOfDay {
			edges = append(edges, c.start, c.end)
		}
	}
	slices.Sort(edges)
	edges = slices.Compact(edges)
	total := new(big.Int)
	for i := 0; i+1 < len(edges); i++ {
		cost, err := m.Cost(t, day.Add(time.Duration(edges[i])))
		if err != nil {
			return nil, err
		}
		part := new(big.Int).SetInt64(int64(cost))
		part.Mul(part, big.NewInt(edges[i+1]-edges[i]))
		total.Add(total, part)
	}
	return new(big.Rat).SetFrac(total, big.NewInt(nanosPerDay)), nil
}

// roundMoney rounds a non-negative amount of picodollars half up; ok is false above MaxMoney.
func roundMoney(r *big.Rat) (Money, bool) {
	q, rem := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if rem.Lsh(rem, 1).Cmp(r.Denom()) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return 0, false
	}
	return Money(q.Int64()), true
}

// mulMoney returns m × n for non-negative values; ok is false above MaxMoney.
func mulMoney(m Money, n int64) (Money, bool) {
	if m != 0 && int64(m) > math.MaxInt64/n {
		return 0, false
	}
	return m * Money(n), true
}
