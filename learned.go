package llmclient

import (
	"sync"
	"sync/atomic"
	"time"
)

// The first-token limit a stream gets when WithFirstTokenTimeout is not set is learned per
// upstream and model from the times to first token that upstream's streams of that model
// took: a high quantile with room to spare, within a floor and a ceiling, so that a silent
// upstream fails over after a few times what it usually takes rather than after a minute,
// while a slow-starting reasoning model that usually takes 40 s keeps its two minutes.
// Until a model has learnedMin streams on an upstream the documented default applies.
const (
	// learnedMin is the number of committed streams an upstream needs for a model before
	// its learned limit applies.
	learnedMin = 20
	// learnedQuantile is the quantile of the times to first token the limit is based on,
	// learnedFactor the room it leaves above it.
	learnedQuantile = 0.95
	learnedFactor   = 4
	// learnedFloor and learnedCeiling bound a learned limit.
	learnedFloor   = 10 * time.Second
	learnedCeiling = 2 * time.Minute
	// learnedWindow is how many samples a model's histogram holds at most: past it every
	// count is halved, so that what an upstream took long ago weighs less than what it
	// takes now.
	learnedWindow = 1024
	// learnedModels bounds the models learned per upstream, whatever names callers send;
	// streams of other models get the default.
	learnedModels = 256
)

// learnedBuckets is the number of histogram buckets: bucket i counts times in
// [2^i, 2^(i+1)) milliseconds, the last one everything longer (about 36 minutes and up).
const learnedBuckets = 22

// ttftHistogram is one upstream's times to first token for one model. Its counters are
// atomic: recording costs a few atomic adds, and a concurrent halving may lose a count,
// which a limit with room to spare does not notice.
type ttftHistogram struct {
	n      atomic.Int64
	counts [learnedBuckets]atomic.Int64
}

// learnedTTFT holds an upstream's histograms by model.
type learnedTTFT struct {
	models sync.Map // model name -> *ttftHistogram
	count  atomic.Int32
}

// record notes a committed stream's time to first token d for model.
func (l *learnedTTFT) record(model string, d time.Duration) {
	h, ok := l.models.Load(model)
	if !ok {
		if l.count.Add(1) > learnedModels {
			l.count.Add(-1)
			return
		}
		var loaded bool
		if h, loaded = l.models.LoadOrStore(model, new(ttftHistogram)); loaded {
			l.count.Add(-1)
		}
	}
	hist := h.(*ttftHistogram)
	hist.counts[ttftBucket(d)].Add(1)
	if hist.n.Add(1) >= learnedWindow {
		hist.n.Store(0)
		for i := range hist.counts {
			c := hist.counts[i].Load()
			hist.counts[i].Store(c / 2)
			hist.n.Add(c / 2)
		}
	}
}

// limit returns the learned first-token limit for model, and false while there is too
// little data.
func (l *learnedTTFT) limit(model string) (time.Duration, bool) {
	h, ok := l.models.Load(model)
	if !ok {
		return 0, false
	}
	hist := h.(*ttftHistogram)
	var counts [learnedBuckets]int64
	var n int64
	for i := range counts {
		counts[i] = hist.counts[i].Load()
		n += counts[i]
	}
	if n < learnedMin {
		return 0, false
	}
	rank := int64(float64(n)*learnedQuantile + 0.999999)
	for i, c := range counts {
		if rank -= c; rank <= 0 {
			upper := time.Duration(int64(1)<<(i+1)) * time.Millisecond // the bucket's top
			return min(max(learnedFactor*upper, learnedFloor), learnedCeiling), true
		}
	}
	return learnedCeiling, true
}

// ttftBucket is the histogram bucket of d.
func ttftBucket(d time.Duration) int {
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
