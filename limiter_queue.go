package llmclient

import (
	"sync/atomic"
	"time"
)

// Bounded queueing under sustained overload (opt-in: WithQueueTarget). A token bucket's
// wait is the queue of reservations ahead of a request plus the time the bucket takes to
// refill the request's own cost. A request with a deadline is admitted while its wait
// fits before the deadline (less the upstream's expected service time), so under
// sustained overload the queue grows to the deadline and every admitted request waits
// nearly all of it: the upstream is as busy, but the callers see the deadline as their
// latency. So, as CoDel does with a packet queue, the limiter watches the queue the
// requests with a deadline meet: once it has stayed above the target for queueInterval
// (longer than a burst), or one request meets a queue longer than queueInterval (the
// bucket is booked that far ahead, past its burst: a replica that sees few requests
// learns it from one), it refuses at once the requests whose queue would be longer than
// the target, until no request has met a longer queue for queueInterval. The refusal is
// by the queue alone (the margin of limiter_fair.go): a large prompt meets the same test
// as a small one and still waits for its own cost, so it keeps its share. The queue stays
// long enough to keep the bucket busy: the upstream's quota is used as before, and the
// requests admitted see about the unloaded latency. Requests without a deadline are not
// refused by it.
//
// It is opt-in because a refusal only helps callers that have something else to do with
// the request (another upstream, an error to return early): a few workers that each send
// their next request once the last is answered keep a queue of their own number of
// requests, and a refusal only makes them send again at once.

// queueInterval is how long the queue must stay above the target to be an overload.
const queueInterval = time.Second

// queueWatch tracks whether the queue of a limiter's token bucket is overloaded. It is
// safe for concurrent use; a lost update between concurrent requests only delays a change
// of state by one request.
type queueWatch struct {
	target      time.Duration // 0: off
	start, last atomic.Int64  // the run's first and last queue above target (unix nanoseconds); 0: none
	over        atomic.Bool
}

// note records the queue a request met at now (unix nanoseconds).
func (q *queueWatch) note(queue time.Duration, now int64) {
	last := q.last.Load()
	if queue <= q.target {
		if last != 0 && now-last >= int64(queueInterval) {
			q.start.Store(0)
			q.last.Store(0)
			if q.over.Load() {
				q.over.Store(false)
			}
		}
		return
	}
	if last == 0 || now-last >= int64(queueInterval) {
		q.start.Store(now) // a new run
	}
	q.last.Store(now)
	if q.over.Load() {
		return
	}
	if s := q.start.Load(); (s != 0 && now-s >= int64(queueInterval)) || queue > queueInterval {
		q.over.Store(true)
	}
}

// bound returns the longest wait a request with a deadline may accept, before its margin
// (see sizeQuantile.margin), for a bucket of nsPerToken nanoseconds per token, largest
// being the usual largest charge or the request's own when larger: negative (no bound)
// unless the queue is overloaded, else the target plus the time the bucket takes to
// refill largest.
func (q *queueWatch) bound(nsPerToken int64, largest int64) time.Duration {
	if !q.over.Load() || nsPerToken <= 0 {
		return -1
	}
	return q.target + time.Duration(min(float64(largest)*float64(nsPerToken), float64(time.Hour)))
}
