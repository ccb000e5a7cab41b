package llmclient

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// serviceTimes is what an upstream's calls take: for one-shot calls (the whole call)
// and for streams (the time to the first token, when a stream is committed), each what a
// call is expected to take at most. A call's time grows with its output, so each kind is
// learned per class of reserved output (MaxTokens, or the reserved output default, in
// powers of two), a class with too few calls using the slowest estimate of any. The limiter refuses,
// with a deadline, a request whose wait would leave less than that (see LimiterWait). It
// is safe for concurrent use.
type serviceTimes struct{ oneShot, stream serviceKind }

// serviceClasses is the number of output classes: up to 2^23 tokens and beyond.
const serviceClasses = 24

// serviceKind is one kind of call's estimates: each class's, and the slowest any class
// was estimated at (it only grows: a bound for the classes not yet known).
type serviceKind struct {
	classes [serviceClasses]serviceTime
	slowest atomic.Int64
}

// serviceClass returns the class of a reserved output.
func serviceClass(out int) int {
	return min(bits.Len(uint(max(out, 1))), serviceClasses-1)
}

// serviceMinCalls is how many calls a class needs before its own estimate is used.
const serviceMinCalls = 3

// expect returns what a call of reserved output out is expected to take at most, 0 when
// unknown: its class's estimate, or while the class has too few calls, the slowest
// class's (a class that has not been seen could be as slow as any).
func (k *serviceKind) expect(out int) time.Duration {
	if c := &k.classes[serviceClass(out)]; c.calls.Load() >= serviceMinCalls {
		return c.expect()
	}
	return time.Duration(k.slowest.Load())
}

func (k *serviceKind) add(out int, d time.Duration, lowerBound bool) {
	c := &k.classes[serviceClass(out)]
	c.add(d, lowerBound)
	for e := int64(c.expect()); ; {
		cur := k.slowest.Load()
		if e <= cur || k.slowest.CompareAndSwap(cur, e) {
			break
		}
	}
}

// serviceTime estimates one kind of call's duration at most: as TCP estimates a round
// trip (RFC 6298), a smoothed mean and mean deviation, expecting the mean plus four
// deviations; and at least the recent peak, which each sample brings a 256th of the way
// back to the mean (the smoothed deviation shrinks after a run of alike calls, which a
// deadline must not trust). It is 0 until the first sample.
type serviceTime struct {
	mu              sync.Mutex
	mean, dev, peak float64 // nanoseconds
	calls           atomic.Int64
	expected        atomic.Int64
}

// maxService bounds a sample and the expectation.
const maxService = time.Hour

// add records a call's duration; with lowerBound, the call was cut short (a timeout) and
// its duration only raises the estimate.
func (s *serviceTime) add(d time.Duration, lowerBound bool) {
	x := float64(min(max(d, 0), maxService))
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.calls.Load()
	switch {
	case lowerBound && (n == 0 || x <= s.mean):
		return
	case n == 0:
		s.mean, s.dev, s.peak = x, x/2, x
	default:
		diff := x - s.mean
		if diff < 0 {
			diff = -diff
		}
		s.dev += (diff - s.dev) / 4
		s.mean += (x - s.mean) / 8
		s.peak = max(x, s.peak-(s.peak-s.mean)/256)
	}
	s.calls.Store(n + 1)
	s.expected.Store(int64(min(max(s.mean+4*s.dev, s.peak), float64(maxService))))
}

// expect returns what a call is expected to take at most, 0 when unknown.
func (s *serviceTime) expect() time.Duration { return time.Duration(s.expected.Load()) }

// expect returns the expected service time of a call of the given kind and reserved
// output.
func (s *serviceTimes) expect(streaming bool, out int) time.Duration {
	if streaming {
		return s.stream.expect(out)
	}
	return s.oneShot.expect(out)
}

// observe records a settled attempt of class class: a complete answer's duration (a
// committed stream's time to first token), or a timeout's as a lower bound. Attempts
// that made no call, or failed otherwise, say nothing of the service time.
func (s *serviceTimes) observe(a *attempt, class Class) {
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
	case ClassNone, ClassContentFiltered, ClassEmptyOutput:
		if streaming && a.ttft <= 0 {
			return // a stream that sent no token
		}
		kind.add(out, d, false)
	case ClassTimeout:
		kind.add(out, d, true)
	}
}

// streaming reports whether a is a stream's attempt.
func (a *attempt) streaming() bool {
	if a.tx != nil {
		return a.tx.call.Stream
	}
	return a.r != nil && a.r.keep
}
