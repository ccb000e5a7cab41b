package llmclient

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient/failure"
)

// The recent-attempts window of Snapshot: six slots of ten seconds, so a snapshot covers
// between the last 50 and the last 60 seconds.
const (
	recentSlots = 6
	recentWidth = 10 * time.Second
)

// recentBins is the number of latency bins: microseconds in bins a quarter octave wide
// (values under 4µs exact), up to 2^35µs (about 9.5 hours), where they saturate.
const (
	recentMaxOctave = 34
	recentBins      = 4*(recentMaxOctave-1) + 4
)

// recentStats counts an upstream's recent upstream calls, their failures and a histogram
// of their latencies, in a ring of time slots. Adding is lock-free but for the first
// sample of each slot (every ten seconds), which resets the slot under a mutex. Its zero
// value is ready to use; it is safe for concurrent use.
type recentStats struct {
	mu    sync.Mutex // resets a slot for a new period
	slots [recentSlots]recentSlot
}

type recentSlot struct {
	stamp       atomic.Int64 // the slot's period + 1; 0: never used
	errors      atomic.Int64
	rateLimited atomic.Int64
	bins        [recentBins]atomic.Int64
}

// recentBin returns the latency bin of d.
func recentBin(d time.Duration) int {
	us := uint64(max(d, 0) / time.Microsecond)
	if us < 4 {
		return int(us)
	}
	o := bits.Len64(us) - 1
	if o > recentMaxOctave {
		return recentBins - 1
	}
	return 4*(o-1) + int((us>>(o-2))&3)
}

// recentBinValue is the middle of bin i.
func recentBinValue(i int) time.Duration {
	if i < 4 {
		return time.Duration(i) * time.Microsecond
	}
	o, s := i/4+1, i%4
	lo := uint64(4+s) << (o - 2)
	width := uint64(1) << (o - 2)
	return time.Duration(lo*2+width) * time.Microsecond / 2
}

// add counts one upstream call that ended at end after lat, with class.
func (r *recentStats) add(end time.Time, lat time.Duration, class failure.Class) {
	period := end.UnixNano() / int64(recentWidth)
	s := &r.slots[period%recentSlots]
	if st := s.stamp.Load(); st != period+1 {
		if st > period+1 {
			return // a late sample for a slot already reused
		}
		r.mu.Lock()
		if s.stamp.Load() < period+1 {
			s.errors.Store(0)
			s.rateLimited.Store(0)
			for i := range s.bins {
				s.bins[i].Store(0)
			}
			s.stamp.Store(period + 1)
		}
		r.mu.Unlock()
	}
	s.bins[recentBin(lat)].Add(1)
	if class != failure.None && class != failure.Canceled {
		s.errors.Add(1)
		if class == failure.RateLimited {
			s.rateLimited.Add(1)
		}
	}
}

// recentSummary is what a snapshot reports of the recent window.
type recentSummary struct {
	attempts, errors, rateLimited int64
	p50, p90, p99                 time.Duration
}

// summary reads the slots of the window that ends at now. The counts are consistent with
// each other: errors never exceed attempts, nor rate limits errors.
func (r *recentStats) summary(now time.Time) recentSummary {
	cur := now.UnixNano() / int64(recentWidth)
	var bins [recentBins]int64
	var out recentSummary
	for i := range r.slots {
		s := &r.slots[i]
		st := s.stamp.Load() - 1
		if st < 0 || st > cur || st <= cur-recentSlots {
			continue
		}
		for j := range s.bins {
			n := s.bins[j].Load()
			bins[j] += n
			out.attempts += n
		}
		out.errors += s.errors.Load()
		out.rateLimited += s.rateLimited.Load()
	}
	out.errors = min(out.errors, out.attempts)
	out.rateLimited = min(out.rateLimited, out.errors)
	out.p50 = percentile(&bins, out.attempts, 0.50)
	out.p90 = percentile(&bins, out.attempts, 0.90)
	out.p99 = percentile(&bins, out.attempts, 0.99)
	return out
}

// percentile returns the q-quantile of the histogram of total samples, 0 when empty.
func percentile(bins *[recentBins]int64, total int64, q float64) time.Duration {
	if total <= 0 {
		return 0
	}
	target := int64(math.Ceil(q * float64(total)))
	var seen int64
	for i, n := range bins {
		seen += n
		if seen >= target {
			return recentBinValue(i)
		}
	}
	return recentBinValue(recentBins - 1)
}

// recentLatency is what the recent window records of an attempt: a stream's time to its
// first token, else the upstream call's duration.
func (at *Attempt) recentLatency() time.Duration {
	if at.TimeToFirstToken > 0 {
		return at.TimeToFirstToken
	}
	return at.Latency
}
