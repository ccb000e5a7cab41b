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
	ewma atomic.Uint64 // float64 bits of the moving average, in nanoseconds; 0: none yet
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
	ewmaWeight   = 0.2
	statsWindow  = 30 * time.Second
	minQuantileN = 20 // samples needed before a percentile is trusted
)

// record adds one sample at now.
func (s *latencyStats) record(d time.Duration, now time.Time) {
	if d <= 0 {
		d = 1
	}
	x := float64(d)
	for {
		old := s.ewma.Load()
		avg := math.Float64frombits(old)
		next := x
		if old != 0 {
			next = avg + ewmaWeight*(x-avg)
		}
		if s.ewma.CompareAndSwap(old, math.Float64bits(next)) {
			break
		}
	}
	h := s.window(now)
	h.counts[bits.Len64(uint64(d))-1].Add(1)
}

// window returns the current histogram at now, starting a new one when its span is over.
func (s *latencyStats) window(now time.Time) *histogram {
	idx := now.UnixNano() / int64(statsWindow)
	h := &s.windows[idx%2]
	if old := h.stamp.Load(); old != idx && h.stamp.CompareAndSwap(old, idx) {
		for i := range h.counts {
			h.counts[i].Store(0)
		}
	}
	return h
}

// average returns the moving average, 0 when there is no sample.
func (s *latencyStats) average() time.Duration {
	return time.Duration(math.Float64frombits(s.ewma.Load()))
}

// quantile returns the q-quantile of the samples of the current and previous windows (the
// upper bound of the bucket it falls in), and false when there are too few of them.
func (s *latencyStats) quantile(q float64, now time.Time) (time.Duration, bool) {
	idx := now.UnixNano() / int64(statsWindow)
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
