package llmclient

import (
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// A request's wait in a token bucket is the queue ahead of it plus the time the bucket
// takes to hold its own cost. Near a deadline this refuses large prompts first: with the
// queue just short of the deadline, small requests still fit and large ones never do, so
// under overload a stream of small requests keeps every large one out. The limiter
// therefore refuses by the queue alone: a request whose deadline bounds its wait gets
// the bound a request of the largest usual size (about the 99th percentile of recent
// charges) would get, however small it is. Every request then meets the same test, and
// each still waits only as long as its own cost needs; the queue stays as long as before
// less the largest usual request, so the upstream stays as busy. The percentile is high
// because the queue sits at the refusal bound under overload: a request above it is
// refused nearly every time. Where a key's share of the upstream's window is barely
// larger than the largest prompts (processes sharing a key through its headers), a 90th
// percentile served the largest quarter of requests at two thirds of the overall rate;
// the 99th serves it at about the overall rate (BENCHMARKS.md, section 12).

// sizeQuantile tracks about the 99th percentile of the charges of the requests with a
// deadline a limiter admits (the only ones its margins apply to), by stochastic
// approximation: each sampled charge moves the estimate up by sizeUp steps when it is
// above, down by one when it is not (a step is a sizeStep-th of the estimate). It is
// updated for one admission in sizeSample, without locking (a lost update only slows it
// down). It is safe for concurrent use.
type sizeQuantile struct{ q atomic.Int64 }

const (
	// sizeSample is the share of admissions (1 in sizeSample) that update the estimate.
	sizeSample = 4
	// sizeUp and sizeStep: a charge above the estimate raises it by sizeUp steps of a
	// sizeStep-th of it, one at or below lowers it by one step, which settles where
	// sizeUp/(sizeUp+1) of the charges are at or below: the 99th percentile.
	sizeUp   = 99
	sizeStep = 256
)

func (s *sizeQuantile) observe(cost int) {
	if rand.Uint32()%sizeSample == 0 {
		s.update(cost)
	}
}

// update moves the estimate by one sampled charge. Its steps up are large (an update
// above the estimate raises it by 99/256): the estimate wanders about the percentile,
// which is enough for a margin, and follows a change of sizes within a few hundred
// admissions.
func (s *sizeQuantile) update(cost int) {
	q := s.q.Load()
	step := max(q/sizeStep, 1)
	if int64(cost) > q {
		q += sizeUp * step
	} else {
		q -= step
	}
	s.q.Store(min(max(q, 0), maxCost))
}

// margin is how much sooner than its deadline requires a request of the given cost must
// be admitted, for its refusal to depend on the queue only: the time the token bucket
// (nsPerToken nanoseconds per token, 0 for none) takes to refill the difference between
// the usual largest charge and its own.
func (s *sizeQuantile) margin(cost int, nsPerToken int64) time.Duration {
	q := s.q.Load()
	if nsPerToken <= 0 || q <= int64(cost) {
		return 0
	}
	return time.Duration(min(float64(q-int64(cost))*float64(nsPerToken), float64(time.Hour)))
}
