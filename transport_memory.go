package llmclient

import (
	"sync"
	"time"
)

// How long, and how many, failures the transport remembers for the SDKs' own retries.
const (
	recentFailuresTTL = 2 * time.Minute
	recentFailuresMax = 512
)

// recentFailures remembers the final errors the transport returned to requests from
// retrying SDKs, by request fingerprint, so that the SDK's retry of the same request gets
// the same error at once instead of new upstream attempts. It is bounded in size and age
// and safe for concurrent use.
type recentFailures struct {
	mu    sync.Mutex
	ttl   time.Duration
	max   int
	byKey map[uint64]recentFailure
	order []uint64 // insertion order, oldest first, for eviction
}

type recentFailure struct {
	err     *Error
	expires time.Time
}

func newRecentFailures(max int, ttl time.Duration) *recentFailures {
	return &recentFailures{ttl: ttl, max: max, byKey: make(map[uint64]recentFailure)}
}

// put remembers err for the request with fingerprint key.
func (r *recentFailures) put(key uint64, err *Error, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byKey[key]; !ok {
		for len(r.order) >= r.max {
			delete(r.byKey, r.order[0])
			r.order = r.order[1:]
		}
		r.order = append(r.order, key)
	}
	r.byKey[key] = recentFailure{err: err, expires: now.Add(r.ttl)}
}

// get returns a copy of the error remembered for key, or nil.
func (r *recentFailures) get(key uint64, now time.Time) *Error {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.byKey[key]
	if !ok || now.After(f.expires) {
		return nil
	}
	cp := *f.err
	return &cp
}
