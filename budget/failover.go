package budget

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/llmclient/llmclient/pricing"
)

// Failover keeps failover from blowing the bill: a call that fails on its first upstream
// may move to one whose price for it is at most MaxRatio times the first's — or, with
// WhenOpen, to a costlier one only while the first upstream's circuit breaker is not
// closed (an outage, not a transient error). Set it per model group with
// llmclient.WithCostFailover.
//
// Prices are compared for the call itself: the estimated cost of its request (prompt
// estimate plus its largest output) at each upstream's price for its model, tiers and
// time of day included. A failover the rule refuses is a local refusal of class
// unavailable wrapping ErrCostlyFailover, recorded in the trace; the call goes on to the
// next upstream of its route, or ends.
type Failover struct {
	// MaxRatio is the largest price ratio to the call's first upstream that a failover
	// target may have; it must lie in [1e-6, 1e6] (NaN and infinities are rejected), read
	// to a millionth. 1 allows only upstreams no costlier than the first; 3 allows up to
	// three times its price.
	MaxRatio float64
	// WhenOpen allows failover to costlier upstreams too while the first upstream's
	// breaker is open or half-open.
	WhenOpen bool
	// AllowUnpriced lets failover go to an upstream whose price for the call is unknown,
	// or from a first upstream whose price is. Default false: what cannot be compared is
	// refused.
	AllowUnpriced bool
}

// Validate reports a Failover the Client cannot use.
func (f Failover) Validate() error {
	if !(f.MaxRatio > 0) || math.IsInf(f.MaxRatio, 1) || f.MaxRatio > 1e6 {
		return fmt.Errorf("Failover.MaxRatio %v is outside (0, 1e6]", f.MaxRatio)
	}
	if f.MaxRatio*1e6 < 1 {
		return fmt.Errorf("Failover.MaxRatio %v is below a millionth", f.MaxRatio)
	}
	return nil
}

// Within reports whether a target's estimate is at most MaxRatio times the first
// upstream's, compared exactly (no floating-point rounding of the amounts).
func (f Failover) Within(first, target pricing.Money) bool {
	first, target = max(first, 0), max(target, 0)
	ppm := uint64(toPPM(f.MaxRatio))
	// target × 1e6 <= first × ppm, in 128 bits.
	lh, ll := bits.Mul64(uint64(target), 1e6)
	rh, rl := bits.Mul64(uint64(first), ppm)
	return lh < rh || lh == rh && ll <= rl
}
