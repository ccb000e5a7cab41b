package llmclient

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient/failure"
)

// serviceTimes is what an upstream's calls take: for one-shot calls (the whole call)
// and for streams (the time to the first token, when a stream is committed), each what a
// call is expected to take at most. A call's time grows with its output, so each kind is
// learned per class of reserved output (MaxTokens, or the reserved output default, in
// powers of two), a class with too few calls using the slowest estimate of any. The limiter refuses,
// with a deadline, a request whose wait would leave less than that (see LimiterWait). It
// is safe for concurrent use.
//
// A one-shot call's time also depends on how much of its reserved output it produced:
// the calls of a class that all stopped short say little of one that will produce all of
// it. So one-shot calls with a reported output also fit the time as a line in the output
// tokens (outputFit), and a call is expected to take at most that line at its reserved
// output, plus four deviations of the calls about it, when that is more than its class's
// estimate. The line is not taken beyond twice the largest output the calls recently
// produced: the time per token of short answers says nothing of a call a hundred times
// as long, which the upstream has not been seen to produce.
//
// The client must not shut an upstream out on an estimate nothing confirms: a refused
// call makes no sample. So every estimate decays once no call has confirmed it for
// serviceFresh (it halves every serviceHalfLife after that, and the next sample finds it
// decayed), and a call that fits only the decayed estimate is admitted as a probe, one at
// a time per upstream (probe): its outcome is the sample that confirms the estimate (a
// timeout) or brings it down.
type serviceTimes struct {
	oneShot, stream serviceKind
	perToken        outputFit
	// probeUntil is when the probe in flight, if any, ends at the latest (its deadline; unix
	// nanoseconds): no other probe is admitted before, unless a sample comes first.
	probeUntil atomic.Int64
}

const (
	// serviceFresh is how long a sample confirms an estimate in full.
	serviceFresh = 10 * time.Second
	// serviceHalfLife is how fast an estimate no sample confirms decays after that.
	serviceHalfLife = 10 * time.Second
)

// staleness is the factor an estimate last confirmed at the unix nanosecond at is worth
// at now: 1 while fresh, then halving every serviceHalfLife.
func staleness(at, now int64) float64 {
	age := now - at
	if at == 0 || age <= int64(serviceFresh) {
		return 1
	}
	return math.Exp2(-float64(age-int64(serviceFresh)) / float64(serviceHalfLife))
}

// decayed returns d worth f.
func decayed(d time.Duration, f float64) time.Duration {
	if f >= 1 {
		return d
	}
	return time.Duration(float64(d) * f)
}

// serviceClasses is the number of output classes: up to 2^23 tokens and beyond.
const serviceClasses = 24

// serviceKind is one kind of call's estimates: each class's, and the slowest any class
// was estimated at (it only grows: a bound for the classes not yet known).
type serviceKind struct {
	classes [serviceClasses]serviceTime
	// slowest decays as an estimate does, from slowestAt (unix nanoseconds), when no
	// class raises it again.
	slowest, slowestAt atomic.Int64
}

// serviceClass returns the class of a reserved output.
func serviceClass(out int) int {
	return min(bits.Len(uint(max(out, 1))), serviceClasses-1)
}

// serviceMinCalls is how many calls a class needs before its own estimate is used.
const serviceMinCalls = 3

// expect returns what a call of reserved output out is expected to take at most, 0 when
// unknown: its class's estimate, or while the class has too few calls, the slowest
// class's (a class that has not been seen could be as slow as any); and that estimate
// decayed by its staleness at now (unix nanoseconds).
func (k *serviceKind) expect(out int, now int64) (full, stale time.Duration) {
	if c := &k.classes[serviceClass(out)]; c.calls.Load() >= serviceMinCalls {
		return c.expect(now)
	}
	full = time.Duration(k.slowest.Load())
	return full, decayed(full, staleness(k.slowestAt.Load(), now))
}

func (k *serviceKind) add(out int, d time.Duration, lowerBound bool, now int64) {
	e := k.classes[serviceClass(out)].add(d, lowerBound, now)
	// Raise the slowest when the class's estimate passes its decayed value. (Two adds at
	// once may leave the lower of the two: the bound is an estimate either way.)
	cur := time.Duration(k.slowest.Load())
	if e > decayed(cur, staleness(k.slowestAt.Load(), now)) {
		k.slowest.Store(int64(e))
		k.slowestAt.Store(now)
	}
}

// serviceTime estimates one kind of call's duration at most: as TCP estimates a round
// trip (RFC 6298), a smoothed mean and mean deviation, expecting the mean plus four
// deviations; and at least the recent peak, which each sample brings a 256th of the way
// back to the mean (the smoothed deviation shrinks after a run of alike calls, which a
// deadline must not trust). It is 0 until the first sample. A sample after a pause finds
// the state decayed by its staleness.
type serviceTime struct {
	mu              sync.Mutex
	mean, dev, peak float64 // nanoseconds
	calls           atomic.Int64
	expected        atomic.Int64
	at              atomic.Int64 // the last sample's time, unix nanoseconds
}

// maxService bounds a sample and the expectation.
const maxService = time.Hour

// add records a call's duration at now (unix nanoseconds); with lowerBound, the call was
// cut short (a timeout) and its duration only raises the estimate (it confirms it
// either way). It returns the estimate as the sample left it, which is fresh at now.
func (s *serviceTime) add(d time.Duration, lowerBound bool, now int64) time.Duration {
	x := float64(min(max(d, 0), maxService))
	// Every value here is finite and not negative, so plain comparisons stand in for the
	// float min and max (whose NaN and signed-zero cases cost a dozen instructions each),
	// and nothing between Lock and Unlock can panic: no defer.
	s.mu.Lock()
	n := s.calls.Load()
	if f := staleness(s.at.Load(), now); f < 1 {
		s.mean, s.dev, s.peak = s.mean*f, s.dev*f, s.peak*f
		s.expected.Store(int64(float64(s.expected.Load()) * f))
	}
	s.at.Store(now)
	switch {
	case lowerBound && (n == 0 || x <= s.mean):
		e := s.expected.Load()
		s.mu.Unlock()
		return time.Duration(e)
	case n == 0:
		s.mean, s.dev, s.peak = x, x/2, x
	default:
		diff := x - s.mean
		if diff < 0 {
			diff = -diff
		}
		s.dev += (diff - s.dev) / 4
		s.mean += (x - s.mean) / 8
		if p := s.peak - (s.peak-s.mean)/256; p > x {
			s.peak = p
		} else {
			s.peak = x
		}
	}
	e := s.mean + 4*s.dev
	if e < s.peak {
		e = s.peak
	}
	if e > float64(maxService) {
		e = float64(maxService)
	}
	s.calls.Store(n + 1)
	s.expected.Store(int64(e))
	s.mu.Unlock()
	return time.Duration(int64(e))
}

// expect returns what a call is expected to take at most, 0 when unknown, and that
// decayed by its staleness at now.
func (s *serviceTime) expect(now int64) (full, stale time.Duration) {
	full = time.Duration(s.expected.Load())
	return full, decayed(full, staleness(s.at.Load(), now))
}

// expect returns the expected service time of a call of the given kind and reserved
// output, and what it is worth at now (unix nanoseconds) by the staleness of its samples.
func (s *serviceTimes) expect(streaming bool, out int, now int64) (full, stale time.Duration) {
	if streaming {
		return s.stream.expect(out, now)
	}
	full, stale = s.oneShot.expect(out, now)
	pf, ps := s.perToken.expect(out, now)
	return max(full, pf), max(stale, ps)
}

// probe reports whether a call that fits only the decayed estimate may be let through
// now to try it, until: when no other probe is in flight. A sample ends the probe early.
func (s *serviceTimes) probe(now int64, until time.Duration) bool {
	cur := s.probeUntil.Load()
	return cur <= now && s.probeUntil.CompareAndSwap(cur, now+int64(max(until, 0)))
}

// observe records a settled attempt of class class: a complete answer's duration (a
// committed stream's time to first token), or a timeout's as a lower bound; and a
// one-shot answer's duration against its reported output tokens (usage, nil when none).
// Attempts that made no call, or failed otherwise, say nothing of the service time.
func (s *serviceTimes) observe(a *attempt, class failure.Class, usage *Usage) {
	if !a.called {
		return
	}
	kind, d := &s.oneShot, a.latency
	streaming := a.streaming()
	if streaming {
		kind = &s.stream
		if a.ttft > 0 {
			d = a.ttft
		}
	}
	out := a.r.c.cfg.limiter.output(a.req)
	switch class {
	case failure.None, failure.ContentFiltered, failure.EmptyOutput:
		if streaming && a.ttft <= 0 {
			return // a stream that sent no token
		}
		now := a.endNano()
		kind.add(out, d, false, now)
		if !streaming && usage != nil && !usage.Estimated && usage.OutputTokens >= 0 {
			s.perToken.add(usage.OutputTokens, d, now)
		}
		s.probeUntil.Store(0)
	case failure.Timeout:
		kind.add(out, d, true, a.endNano())
		s.probeUntil.Store(0)
	}
}

// endNano is the attempt's end in unix nanoseconds: the time its layers read as the
// upstream call ended (a stream's when it was settled), else the time now.
func (a *attempt) endNano() int64 {
	if a.end.IsZero() {
		return time.Now().UnixNano()
	}
	return a.end.UnixNano()
}

// outputFit fits one-shot calls' durations as a line in their output tokens, by
// exponentially weighted least squares (each call weighs outputForget of the next), and
// publishes the line and the deviation of the calls about it for expect. While the calls'
// outputs are too alike to tell the slope (their spread under a twentieth of their mean),
// the slope is the mean duration per token, which bounds the true one from above since
// the line's intercept is not negative. The line is taken at most at twice the largest
// output recently produced (a peak that each call brings a 256th of the way back to the
// mean output). A call after a pause finds the durations decayed by their staleness. It
// is safe for concurrent use.
type outputFit struct {
	mu                          sync.Mutex
	w, o, d, oo, od, dd         float64 // weighted sums: weight, outputs, durations, products
	peak                        float64 // the recent largest output
	calls                       int64
	intercept, slope, deviation atomic.Uint64 // float64 bits, nanoseconds (per token)
	reach                       atomic.Uint64 // float64 bits: the largest output the line is taken at
	at                          atomic.Int64  // the last call's time, unix nanoseconds
	ready                       atomic.Bool
}

const (
	// outputForget is how much a call weighs less than the next.
	outputForget = 0.99
	// outputMinCalls is how many calls the fit needs before expect uses it.
	outputMinCalls = serviceMinCalls
)

func (f *outputFit) add(out int, d time.Duration, now int64) {
	o, x := float64(min(max(out, 0), maxCost)), float64(min(max(d, 0), maxService))
	// As in serviceTime.add: the sums are finite and nothing between Lock and Unlock can
	// panic (no defer), and nonNegative stands in for the float max with 0.
	f.mu.Lock()
	if k := staleness(f.at.Load(), now); k < 1 {
		// The calls are remembered as if they had taken k times as long.
		f.d, f.od, f.dd = f.d*k, f.od*k, f.dd*k*k
	}
	f.at.Store(now)
	f.w = f.w*outputForget + 1
	f.o = f.o*outputForget + o
	f.d = f.d*outputForget + x
	f.oo = f.oo*outputForget + o*o
	f.od = f.od*outputForget + o*x
	f.dd = f.dd*outputForget + x*x
	f.calls++
	mo, md := f.o/f.w, f.d/f.w
	varO := nonNegative(f.oo/f.w - mo*mo)
	varD := nonNegative(f.dd/f.w - md*md)
	var slope, intercept float64
	if mo > 0 && math.Sqrt(varO) >= mo/20 {
		slope = nonNegative((f.od/f.w - mo*md) / varO)
		intercept = nonNegative(md - slope*mo)
	} else if mo > 0 {
		slope = md / mo
	} else {
		intercept = md
	}
	// The deviation about the line: the durations' variance less what the line explains.
	resid := nonNegative(varD - slope*slope*varO)
	if math.IsInf(resid, 0) {
		resid = 0
	}
	f.intercept.Store(math.Float64bits(intercept))
	f.slope.Store(math.Float64bits(slope))
	f.deviation.Store(math.Float64bits(math.Sqrt(resid)))
	if p := f.peak - (f.peak-mo)/256; p > o {
		f.peak = p
	} else {
		f.peak = o
	}
	f.reach.Store(math.Float64bits(2 * max(f.peak, 1)))
	f.ready.Store(f.calls >= outputMinCalls)
	f.mu.Unlock()
}

// nonNegative is max(v, 0) for a v that is not NaN (0 for NaN), without the float max's
// NaN and signed-zero cases: -0 gives +0, as max does.
func nonNegative(v float64) float64 {
	if !(v > 0) {
		return 0
	}
	return v
}

// expect returns what a call of reserved output out is expected to take at most by the
// fit: the line at out (at most at twice the recent largest output) plus four deviations,
// 0 until the fit has outputMinCalls calls; and that decayed by its staleness at now.
func (f *outputFit) expect(out int, now int64) (full, stale time.Duration) {
	if !f.ready.Load() {
		return 0, 0
	}
	a := math.Float64frombits(f.intercept.Load())
	b := math.Float64frombits(f.slope.Load())
	sd := math.Float64frombits(f.deviation.Load())
	// Comparisons stand in for the float min: reach is at least 2 and the line is not
	// NaN unless its terms are, so they choose as min does.
	o := float64(min(max(out, 0), maxCost))
	if r := math.Float64frombits(f.reach.Load()); r < o {
		o = r
	}
	e := math.Ceil(a + b*o + 4*sd)
	if e > float64(maxService) {
		e = float64(maxService)
	}
	full = time.Duration(e)
	return full, decayed(full, staleness(f.at.Load(), now))
}
