package llmclient

import (
	"math"

	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/ratelimit"
)

// closeSpec reports whether the buckets of a and b agree within specTolerance.
func closeSpec(a, b limitstore.Spec) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) <= specTolerance*max(math.Abs(x), math.Abs(y)) }
	ra := [4]limitstore.Rate{a.Requests, a.Tokens, a.DailyRequests, a.DailyTokens}
	rb := [4]limitstore.Rate{b.Requests, b.Tokens, b.DailyRequests, b.DailyTokens}
	for i := range ra {
		la, lb := ra[i].Limited(), rb[i].Limited()
		if la != lb || la && !(near(ra[i].PerSecond, rb[i].PerSecond) && near(ra[i].Burst, rb[i].Burst)) {
			return false
		}
	}
	return true
}

// window is what the headers say of one quota dimension.
type window struct {
	known bool
	// long marks a window longer than a minute (a day's quota).
	long bool
	// limit is the reported limit; capacity the bucket the reset refills; rate its
	// refill per second.
	limit, capacity, rate float64
}

const (
	// shortWindow and longWindow are the shares of the limit below and above which the
	// bucket a reset refills is taken for a shorter or a longer window than a minute.
	shortWindow = 0.9
	longWindow  = 1.25
	// maxReset bounds the reset considered.
	maxReset = 31 * secondsPerDay
	// maxUnitWait bounds, in seconds, what a long window learned from the headers makes
	// one unit (a request, a token) wait: its span is at most that many times its limit.
	// A daily quota of 24 or more units is learned as reported; a report of a tiny limit
	// with a far reset (a lying or broken upstream) throttles the key to a unit an hour,
	// the default key eviction, rather than locking it for up to maxReset.
	maxUnitWait = 3600
)

// remaining is the reported remaining count, within [0, limit].
func (w *window) remaining(rw ratelimit.Window) float64 {
	u := float64(max(rw.Remaining, 0))
	if w.known {
		u = min(u, w.limit)
	}
	return u
}

// learn updates w from a report. A reset of zero says the bucket is full: it holds the
// remaining count. Otherwise the bucket the reset refills tells the window, when it is
// clearly shorter or longer than a minute's.
func (w *window) learn(rw ratelimit.Window) {
	if !rw.Known || rw.Limit <= 0 {
		return
	}
	limit := float64(rw.Limit)
	u := min(float64(max(rw.Remaining, 0)), limit)
	reset := min(max(rw.Reset.Seconds(), 0), maxReset)
	perMinute := limit / 60
	refilled := u + reset*perMinute // the bucket the reset refills, read as a minute's
	if reset <= 0 {
		if u <= 0 {
			return // "full, and empty": says nothing
		}
		refilled = u
	}
	was := *w
	switch {
	case reset > 0 && refilled > longWindow*limit && u < limit:
		span := min(max(reset*limit/(limit-u), 120), maxReset, maxUnitWait*limit)
		rate := limit / span
		if was.known && was.long {
			rate = was.rate + (rate-was.rate)/5
		}
		*w = window{known: true, long: true, limit: limit, capacity: limit, rate: rate}
	case refilled < shortWindow*limit:
		capacity := max(refilled, perMinute/60, 1) // at least a second's worth
		if was.known && !was.long && was.capacity < shortWindow*was.limit {
			capacity = was.capacity + (capacity-was.capacity)/5
		}
		*w = window{known: true, limit: limit, capacity: capacity, rate: perMinute}
	default:
		*w = window{known: true, limit: limit, capacity: limit, rate: perMinute}
	}
}

// merge meets the configured per-minute and daily buckets with what w says: a learned
// bucket where none is configured, else the smaller rate and burst.
func (w *window) merge(minute, day limitstore.Rate, burstFraction float64) (limitstore.Rate, limitstore.Rate) {
	if !w.known {
		return minute, day
	}
	meet := func(r limitstore.Rate, learned limitstore.Rate) limitstore.Rate {
		if !r.Limited() {
			return learned
		}
		return limitstore.Rate{PerSecond: min(r.PerSecond, learned.PerSecond), Burst: min(r.Burst, learned.Burst)}
	}
	if w.long {
		return minute, meet(day, limitstore.Rate{PerSecond: w.rate, Burst: w.capacity})
	}
	learned := limitstore.Rate{PerSecond: w.rate, Burst: w.capacity}
	if !minute.Limited() {
		learned.Burst = min(w.capacity, max(1, math.Floor(w.limit*burstFraction)))
	}
	return meet(minute, learned), day
}

// target is the level the state's bucket for this dimension (minute or daily, as w
// says) should have had when the upstream reported rw, as far below its burst as the
// upstream's bucket was below its capacity, and the reserve it should keep: margin, a
// share of the burst (dailyMargin for a daily bucket). NaN when unknown, and when the
// report's limit or remaining count is negative.
func (w *window) target(rw ratelimit.Window, minute, day limitstore.Rate, margin float64) (target, reserve float64) {
	r := minute
	if w.long {
		r, margin = day, dailyMargin
	}
	if !rw.Known || !r.Limited() || rw.Remaining < 0 || rw.Limit < 0 {
		return math.NaN(), math.NaN() // a negative count (a custom adapter's) is no count
	}
	burst := r.Size()
	capacity := burst // the upstream's bucket, when the headers do not say
	if w.known {
		capacity = w.capacity
	}
	return burst - (capacity - w.remaining(rw)), margin * burst
}
