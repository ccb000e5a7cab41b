package llmclient

import (
	"sync"
	"sync/atomic"
	"time"
)

// A stream's timers that are not set by an option are learned per upstream and model from
// what that upstream's streams of that model usually take: a high quantile with room to
// spare, within a floor and a ceiling, so that a silent upstream fails over after a few
// times what it usually takes rather than after a fixed minute, while a slow-starting or
// long-thinking reasoning model keeps the time it needs. Three limits are learned with
// the same mechanism, each from its own samples:
//
//   - the first-token limit, from the time to first token of each committed stream;
//   - the content idle limit, from the longest wait for a data event each stream that
//     ended cleanly had while its answer was streaming (the content phase);
//   - the reasoning idle limit, from the longest such wait each stream had after a
//     reasoning delta: between reasoning deltas, or before the first content delta after
//     them (the reasoning phase).
//
// A limit is learnedFactor times the learnedQuantile of its samples, within its bounds,
// once learnedMin samples were recorded; until then its default applies.
const (
	// learnedMin is the number of samples (streams) a limit needs before it applies.
	learnedMin = 20
	// learnedQuantile is the quantile of the samples a limit is based on, learnedFactor
	// the room it leaves above it.
	learnedQuantile = 0.95
	learnedFactor   = 4
	// learnedWindow is how many samples a histogram holds at most: past it every count
	// is halved, so that what an upstream took long ago weighs less than what it takes
	// now.
	learnedWindow = 1024
	// learnedModels bounds the models learned per upstream, whatever names callers send;
	// streams of other models get the defaults.
	learnedModels = 256
)

// learnedBounds is the floor and ceiling of one learned limit.
type learnedBounds struct{ floor, ceiling time.Duration }

// The bounds of the three learned limits. The defaults that apply before a limit is
// learned are defaultFirstTokenTimeout, defaultIdleTimeout and defaultReasoningIdleTimeout.
var (
	learnedFirstToken = learnedBounds{floor: 10 * time.Second, ceiling: 2 * time.Minute}
	learnedContent    = learnedBounds{floor: 10 * time.Second, ceiling: 2 * time.Minute}
	learnedReasoning  = learnedBounds{floor: 30 * time.Second, ceiling: 5 * time.Minute}
)

// learnedBuckets is the number of histogram buckets: bucket i counts times in
// [2^i, 2^(i+1)) milliseconds, the last one everything longer (about 36 minutes and up).
const learnedBuckets = 22

// timeHistogram is one series of samples. Its counters are atomic: recording costs a few
// atomic adds, and a concurrent halving may lose a count, which a limit with room to
// spare does not notice.
type timeHistogram struct {
	n      atomic.Int64
	counts [learnedBuckets]atomic.Int64
}

// modelTimes is what an upstream learned of one model.
type modelTimes struct {
	ttft, content, reasoning timeHistogram
}

// learnedTimes holds an upstream's learned times by model.
type learnedTimes struct {
	models sync.Map // model name -> *modelTimes
	count  atomic.Int32
}

// of returns model's times, created on first use, or nil past learnedModels models.
func (l *learnedTimes) of(model string) *modelTimes {
	if m, ok := l.models.Load(model); ok {
		return m.(*modelTimes)
	}
	if l.count.Add(1) > learnedModels {
		l.count.Add(-1)
		return nil
	}
	m, loaded := l.models.LoadOrStore(model, new(modelTimes))
	if loaded {
		l.count.Add(-1)
	}
	return m.(*modelTimes)
}

// lookup returns model's times, or nil when none were recorded.
func (l *learnedTimes) lookup(model string) *modelTimes {
	if m, ok := l.models.Load(model); ok {
		return m.(*modelTimes)
	}
	return nil
}

// record notes a committed stream's time to first token d for model.
func (l *learnedTimes) record(model string, d time.Duration) {
	if m := l.of(model); m != nil {
		m.ttft.record(d)
	}
}

// recordGaps notes the longest wait for a data event a stream of model had in each
// phase; 0 means the phase had none.
func (l *learnedTimes) recordGaps(model string, content, reasoning time.Duration) {
	if content <= 0 && reasoning <= 0 {
		return
	}
	m := l.of(model)
	if m == nil {
		return
	}
	if content > 0 {
		m.content.record(content)
	}
	if reasoning > 0 {
		m.reasoning.record(reasoning)
	}
}

// limit returns the learned first-token limit for model, and false while there is too
// little data.
func (l *learnedTimes) limit(model string) (time.Duration, bool) {
	if m := l.lookup(model); m != nil {
		return m.ttft.limit(learnedFirstToken)
	}
	return 0, false
}

// record adds a sample.
func (h *timeHistogram) record(d time.Duration) {
	h.counts[timeBucket(d)].Add(1)
	if h.n.Add(1) >= learnedWindow {
		h.n.Store(0)
		for i := range h.counts {
			c := h.counts[i].Load()
			h.counts[i].Store(c / 2)
			h.n.Add(c / 2)
		}
	}
}

// limit returns learnedFactor times the learnedQuantile of the samples, within b, and
// false while there are fewer than learnedMin.
func (h *timeHistogram) limit(b learnedBounds) (time.Duration, bool) {
	var counts [learnedBuckets]int64
	var n int64
	for i := range counts {
		counts[i] = h.counts[i].Load()
		n += counts[i]
	}
	if n < learnedMin {
		return 0, false
	}
	rank := int64(float64(n)*learnedQuantile + 0.999999)
	for i, c := range counts {
		if rank -= c; rank <= 0 {
			upper := time.Duration(int64(1)<<(i+1)) * time.Millisecond // the bucket's top
			return min(max(learnedFactor*upper, b.floor), b.ceiling), true
		}
	}
	return b.ceiling, true
}

// timeBucket is the histogram bucket of d.
func timeBucket(d time.Duration) int {
	ms := d.Milliseconds()
	i := 0
	for ms > 1 && i < learnedBuckets-1 {
		ms >>= 1
		i++
	}
	return i
}

// firstTokenLimit is the attempt's own bound on the wait for its stream's first token:
// WithFirstTokenTimeout when set, else what its upstream learned for its model, else the
// default (a minute).
func (a *attempt) firstTokenLimit() time.Duration {
	c := &a.r.c.cfg
	if !c.learnFirstToken {
		return c.stream.firstToken
	}
	if d, ok := a.up.learned.limit(a.call.Model); ok {
		return d
	}
	return c.stream.firstToken
}

// idleLimits are a committed stream's idle limits, for the content phase and the
// reasoning phase: WithIdleTimeout's for both when it is set (0: none), else what its
// upstream learned for its model, else the defaults (1m and 2m). The reasoning phase's
// limit is never below the content phase's.
func (a *attempt) idleLimits() (content, reasoning time.Duration) {
	sc := &a.r.c.cfg.stream
	if !sc.learnIdle {
		return sc.idle, sc.idle
	}
	content, reasoning = sc.idle, sc.reasoningIdle
	if m := a.up.learned.lookup(a.call.Model); m != nil {
		if d, ok := m.content.limit(learnedContent); ok {
			content = d
		}
		if d, ok := m.reasoning.limit(learnedReasoning); ok {
			reasoning = d
		}
	}
	return content, max(reasoning, content)
}
