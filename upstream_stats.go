package llmclient

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// latencyStats keeps an upstream's recent latencies, one kind per instance (one-shot
// latency, or a stream's time to first token): a moving average for routing, and a
// histogram of the last minute or so for percentiles (the hedging delay). Recording is
// lock-free. It is safe for concurrent use.
type latencyStats struct {
	ewma atomic.Int64 // the moving average in nanoseconds; 0: none yet
	// recorded counts the samples; explore is set at every exploreEvery-th, for latency
	// routing to start a call elsewhere (exploreDue).
	recorded atomic.Uint64
	explore  atomic.Bool
	// windows are two histograms of log2 buckets: the current one and the previous one.
	windows [2]histogram
	epoch   atomic.Int64 // index of the current window
}

// histogram counts durations in power-of-two buckets of nanoseconds.
type histogram struct {
	stamp  atomic.Int64
	counts [64]atomic.Int64
}

const (
	ewmaDivisor  = 5 // each sample moves the average by a fifth of its distance to it
	statsWindow  = 30 * time.Second
	minQuantileN = 20 // samples needed before a percentile is trusted
)

// record adds one sample at now.
func (s *latencyStats) record(d time.Duration, now time.Time) {
	x := max(int64(d), 1)
	for {
		// In integers: both are positive, so the difference cannot overflow, and the
		// average, which moves at most a fifth of the way down to x >= 1, stays >= 1.
		old := s.ewma.Load()
		next := x
		if old != 0 {
			next = old + (x-old)/ewmaDivisor
		}
		if s.ewma.CompareAndSwap(old, next) {
			break
		}
	}
	if s.recorded.Add(1)%exploreEvery == 0 {
		s.explore.Store(true)
	}
	idx := windowIndex(now)
	h := &s.windows[uint64(idx)%2]
	if st := h.stamp.Load(); st != idx {
		h.restart(st, idx)
	}
	h.counts[(bits.Len64(uint64(x))-1)&63].Add(1) // x >= 1: within [0, 63] already
}

// exploreDue reports, once per exploreEvery samples recorded, that latency routing should
// start a call on another upstream than this one. It is safe for concurrent use: of the
// calls that ask at once, one is told.
func (s *latencyStats) exploreDue() bool {
	return s.explore.Load() && s.explore.Swap(false)
}

// restart makes h, stamped old, the histogram of the window idx, empty, unless another
// sample did it first.
func (h *histogram) restart(old, idx int64) {
	if h.stamp.CompareAndSwap(old, idx) {
		for i := range h.counts {
			h.counts[i].Store(0)
		}
	}
}

// windowIndex numbers the statsWindow spans of time: the one now falls in. Whole seconds
// suffice, the window being a whole number of them, and cost less to read from now.
func windowIndex(now time.Time) int64 { return now.Unix() / int64(statsWindow/time.Second) }

// average returns the moving average, 0 when there is no sample.
func (s *latencyStats) average() time.Duration {
	return time.Duration(s.ewma.Load())
}

// quantile returns the q-quantile of the samples of the current and previous windows (the
// upper bound of the bucket it falls in), and false when there are too few of them.
func (s *latencyStats) quantile(q float64, now time.Time) (time.Duration, bool) {
	idx := windowIndex(now)
	var counts [64]int64
	var n int64
	for w := range s.windows {
		h := &s.windows[w]
		if st := h.stamp.Load(); st == idx || st == idx-1 {
			for i := range h.counts {
				c := h.counts[i].Load()
				counts[i] += c
				n += c
			}
		}
	}
	if n < minQuantileN {
		return 0, false
	}
	rank := int64(math.Ceil(q * float64(n)))
	for i, c := range counts {
		if rank -= c; rank <= 0 {
			return time.Duration(uint64(1) << uint(i+1)), true
		}
	}
	return 0, false
}

// noteLatency records a's latency in its upstream's statistics: a stream's time to first
// token (or, for a stream that failed before it, the time it waited), a one-shot call's
// latency.
func (r *run) noteLatency(a *attempt) {
	now := a.end
	if now.IsZero() {
		now = time.Now()
	}
	if r.keep && r.tx == nil || a.tx != nil && a.tx.call.Stream {
		d := a.ttft
		if d == 0 {
			d = a.latency
		}
		a.up.ttftStats.record(d, now)
		return
	}
	a.up.latStats.record(a.latency, now)
}
