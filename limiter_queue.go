package llmclient

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/ratelimit"
)

// Bounded queueing under sustained overload (WithQueueTarget, 100ms by default). A token
// bucket's wait is the queue of reservations ahead of a request plus the time the bucket
// takes to refill the request's own cost. A request with a deadline is admitted while
// its wait fits before the deadline (less the upstream's expected service time), so under
// sustained overload the queue grows to the deadline and every admitted request waits
// nearly all of it: the upstream is as busy, but the callers see the deadline as their
// latency.
//
// The limiter tells that overload apart from a queue that is merely long by the requests
// that would not fit, or nearly: the queue is an overload while, first come first served,
// requests with a deadline would wait more than half of what their deadline (less the
// service time) or WithMaxWait accepts. Half, not all: replicas sharing a store learn
// their service times and margins apart, and under first come first served the queue
// grows only until the replica that accepts the shortest wait refuses; the others, which
// accept longer, would never see a wait they do not accept while their admissions keep
// the queue long. A few workers that each send their next request once the last is
// answered keep a queue of their own number of requests, which stays short of that, and
// they are never refused by it; a burst whose queue stays within half of its deadlines is
// not refused either. What first come first served would do is kept as a backlog beside
// the real queue: the work the limiter refused early, which would still be queued had it
// been admitted. It grows by each early refusal's cost, is capped by what a deadline
// accepts (first come first served refuses the rest), and shrinks by the tokens the
// bucket holds unused (work it would have done already), so a sustained overload stays
// one while the limiter keeps its queue short, and ends once the refused work would have
// been done.
//
// During an overload (such requests over at least queueInterval, the last one within
// queueMemory: one request that does not fit is not an overload) the
// limiter refuses at once the requests whose queue would be longer than the target. The
// refusal is by the queue alone (the margin of limiter_fair.go): a large prompt meets the
// same test as a small one and still waits for its own cost, so it keeps its share. The
// queue stays long enough to keep the bucket busy: the upstream's quota is used as
// before, and the requests admitted see about the unloaded latency. Every refusal says
// when the request would have been admitted (Error.AdmitAfter).
//
// A caller that sends a refused request again at once would spin while the queue lasts.
// So a limiter answers at most refusalAllowance refusals in each refusalWindow at once;
// past that, the refusal of a call that has nowhere else to go returns at the window's
// end (or when its context ends, if sooner). A call that can still move to another key or
// upstream is never held: its refusal moves it on at once.

const (
	// queueInterval is how long requests must keep meeting such waits for an overload:
	// longer than a burst.
	queueInterval = time.Second
	// queueMemory is how long a request that would have waited more than half of what
	// it accepts keeps the limiter in overload.
	queueMemory = 30 * time.Second
	// refusalWindow and refusalsPerWindow bound the refusals a limiter answers at once.
	refusalWindow     = 100 * time.Millisecond
	refusalsPerWindow = 64
	// refusalSmallCall is the charge, in tokens, of the small calls a token bucket's
	// allowance of refusals at once is counted in (see refusalAllowance).
	refusalSmallCall = 256
	// defaultQueueTarget is WithQueueTarget's default.
	defaultQueueTarget = 100 * time.Millisecond
)

// queueWatch tracks whether the queue of a limiter's token bucket is overloaded, and
// paces the limiter's refusals. It is safe for concurrent use; a lost update between
// concurrent requests only loses one request's effect on the backlog or the overload.
type queueWatch struct {
	target time.Duration // 0: off
	// missed is when a request last would have waited more than half of what it accepts,
	// since the first of the run of such requests (none queueMemory apart) (unix
	// nanoseconds; 0: none).
	missed, since atomic.Int64
	// backlog is the work refused early that would still be queued first come first
	// served (nanoseconds of the bucket's refill).
	backlog atomic.Int64
	// window is the start of the current refusal window (unix nanoseconds), refused the
	// refusals answered in it; allowance how many of them may be answered at once.
	window, refused atomic.Int64
	allowance       atomic.Int64
}

// note records at now (unix nanoseconds) a request with a deadline that met queue and
// would wait wait, where its deadline and WithMaxWait accept fit (negative: any wait);
// spare is the bucket's refill time left unused after an admission without a wait (0
// otherwise).
func (q *queueWatch) note(wait, spare, fit time.Duration, now int64) {
	if fit < 0 {
		return
	}
	backlog := min(q.backlog.Load(), int64(fit)) // first come first served refuses what does not fit
	if spare > 0 {
		// The bucket holds tokens the refused work would have taken: so much of it would
		// have been done already.
		backlog = max(backlog-int64(spare), 0)
	}
	q.backlog.Store(backlog)
	if wait+time.Duration(backlog) > fit/2 {
		// First come first served would refuse it, or nearly.
		if m := q.missed.Load(); m == 0 || now-m > int64(queueMemory) {
			q.since.Store(now) // a new run
		}
		q.missed.Store(now)
	}
}

// refuse records work of the given length (nanoseconds of the bucket's refill) refused by
// the target.
func (q *queueWatch) refuse(work int64) {
	q.backlog.Add(min(work, int64(queueMemory)))
}

// bound returns the longest wait a request with a deadline may accept at now (unix
// nanoseconds), before its margin (see sizeQuantile.margin), for a bucket of nsPerToken
// nanoseconds per token, largest being the usual largest charge or the request's own when
// larger: negative (no bound) unless the queue is overloaded, else the target plus the
// time the bucket takes to refill largest.
func (q *queueWatch) bound(nsPerToken, largest, now int64) time.Duration {
	m := q.missed.Load()
	if m == 0 || now-m > int64(queueMemory) || m-q.since.Load() < int64(queueInterval) || nsPerToken <= 0 {
		return -1 // no such request lately, or only within a burst
	}
	return q.target + time.Duration(min(float64(largest)*float64(nsPerToken), float64(time.Hour)))
}

// refusalAllowance is how many refusals a limiter whose buckets admit requestsPerSecond
// requests and tokensPerSecond tokens (0: no limit) answers at once per refusalWindow:
// refusalsPerWindow, plus twice the calls it admits in a window, counting calls of
// refusalSmallCall tokens where tokens bound it.
func refusalAllowance(requestsPerSecond, tokensPerSecond float64) int64 {
	perSecond := max(requestsPerSecond, tokensPerSecond/refusalSmallCall)
	return refusalsPerWindow + int64(min(2*perSecond*refusalWindow.Seconds(), 1<<30))
}

// paceRefusal holds the refusal err of a call that has nowhere else to go once the
// limiter has answered its allowance of refusals in the current window at once: it
// returns at the window's end, or when ctx is done, whichever comes first. Other errors,
// and every error in fail-fast mode, pass at once.
func (l *keyLimiter) paceRefusal(ctx context.Context, adm *admission, err error) {
	var e *Error
	if adm.within >= 0 || l.mode == ratelimit.FailFast || !errors.As(err, &e) || e.Class != failure.RateLimited {
		return
	}
	q := &l.queue
	now := time.Now().UnixNano()
	w := q.window.Load()
	if now-w >= int64(refusalWindow) {
		if q.window.CompareAndSwap(w, now) {
			q.refused.Store(0)
		}
		w = q.window.Load()
	}
	if q.refused.Add(1) <= q.allowance.Load() {
		return
	}
	_ = sleep(ctx, time.Duration(w+int64(refusalWindow)-now))
}

// setAllowance sets the refusals answered at once per window for the buckets of spec.
func (q *queueWatch) setAllowance(spec limitstore.Spec) {
	var rps, tps float64
	if spec.Requests.Limited() {
		rps = spec.Requests.PerSecond
	}
	if spec.Tokens.Limited() {
		tps = spec.Tokens.PerSecond
	}
	q.allowance.Store(refusalAllowance(rps, tps))
}
