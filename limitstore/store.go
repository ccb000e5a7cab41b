// Package limitstore is the contract between llmclient's limiter and the place it keeps
// its state, and the in-memory implementation a Client uses by default. Implement Store to
// share limits between processes (the redisstore module does, on Redis); users who only
// configure a Client never need this package beyond passing a Store to
// llmclient.WithLimitStore.
package limitstore

import (
	"context"
	"errors"
	"time"
)

// Store keeps the limiter's state: for each limited scope (an API key, or a caller
// partition) a request bucket, a token bucket, a pause and concurrency slots. The default
// is in memory, private to the Client (NewMemory). A store shared by several
// processes, such as one on Redis, lets replicas that use the same API keys admit against
// one quota; it must make every State method atomic on its own side, on its own
// clock, as described on State.
type Store interface {
	// Open returns the state of the scope name with the given limits, creating it on
	// first use. Scopes with the same name share their state; the empty name is a scope
	// private to the caller. The Client opens each API key's scope in New and each
	// partition's scope on its first request, so Open must not block: a networked store
	// connects lazily. Names never contain an API key.
	Open(name string, spec Spec) State
}

// Spec is what a scope enforces, with every default already applied.
type Spec struct {
	// Requests is the request bucket; zero PerSecond means no request limit.
	Requests Rate
	// Tokens is the token bucket; zero PerSecond means no token limit.
	Tokens Rate
	// MaxConcurrent bounds the slots in use; 0 means no bound.
	MaxConcurrent int
	// BatchShare is the share of each bucket's rate and burst, and of the slots, that
	// PriorityBatch traffic may use, in (0, 1]; 1 means batch is not set apart.
	BatchShare float64
}

// ErrRefused is wrapped by the errors of a State that refuses to admit: no concurrency
// slot came in time, or a shared store cannot be reached and fails closed. The limiter
// reports such an error as llmclient.ErrRateLimited, keeping the store's own error in the
// chain.
var ErrRefused = errors.New("limitstore: refused")

// Rate is a token bucket: it holds at most Burst and refills at PerSecond.
type Rate struct {
	PerSecond float64
	Burst     float64
}

// Lane selects the buckets a reservation draws from.
type Lane uint8

const (
	// LaneMain holds the scope's buckets: every admitted request draws from them.
	LaneMain Lane = iota
	// LaneBatch is the gate that PriorityBatch requests pass before LaneMain: buckets of
	// BatchShare times the main rates and bursts, so batch traffic never takes more than
	// its share and queued batch requests hold no main-bucket capacity while they wait.
	LaneBatch
)

// Reservation asks a State for one request's capacity.
type Reservation struct {
	Lane Lane
	// Requests is the number of requests to take, 0 or 1.
	Requests int
	// Tokens is the request's token cost. A cost larger than the bucket is admitted when
	// the bucket is full, and the rest becomes debt that later requests wait for.
	Tokens int
	// MaxWait is the longest wait the caller accepts; a negative value means no bound.
	MaxWait time.Duration
}

// SlotLease is one concurrency slot held. A shared store gives it an expiry, renewed
// while held, so a crashed process's slots come back.
type SlotLease struct {
	ID    uint64
	Batch bool
}

// State is one scope's state. Every method is atomic with respect to the others, in
// every process that shares the scope, and reads time from the store's own clock, so
// processes with skewed clocks agree. Methods other than AcquireSlot do not block beyond
// the store's own round trip. Implementations must be safe for concurrent use.
//
// Buckets follow the generic cell rate algorithm, one number per bucket (its theoretical
// arrival time), which a server-side script can update in one step: a reservation's
// admission time is the earliest moment every bucket of its lane holds its cost (at most
// the bucket's burst) and the scope is not paused; each bucket is then charged at that
// moment. Reservations are served in arrival order, none is polled, and a reservation
// whose wait exceeds its MaxWait takes nothing.
type State interface {
	// Reserve admits r at the earliest possible time and returns the wait until then, or
	// takes nothing and returns the wait it would have needed with ok false when that
	// wait exceeds r.MaxWait.
	Reserve(ctx context.Context, r Reservation) (wait time.Duration, ok bool, err error)
	// Adjust gives back (negative amounts) or takes (positive amounts) requests and tokens
	// of the lane's buckets after the fact: a canceled reservation, an attempt that failed
	// before the upstream counted it, the difference between estimated and reported usage.
	// A bucket never holds more than its burst.
	Adjust(ctx context.Context, lane Lane, requests, tokens int) error
	// Sync lowers the main buckets to the upstream's view: at most requests requests and
	// tokens tokens remain now. A negative value means unknown. It never raises a bucket.
	Sync(ctx context.Context, requests, tokens int64) error
	// Pause stops admission for d from now, for every caller of the scope: the upstream
	// answered 429 with a Retry-After. A longer pause already in force is kept.
	Pause(ctx context.Context, d time.Duration) error
	// PauseLeft returns how long the current pause lasts, 0 when there is none.
	PauseLeft(ctx context.Context) (time.Duration, error)
	// AcquireSlot takes a concurrency slot, waiting in arrival order for at most maxWait
	// (negative: no bound) or until ctx is done. Batch requests hold at most BatchShare of
	// the slots (at least one). It returns the time it waited; when no slot came in time it
	// returns an error that wraps ErrRefused, or ctx's error.
	AcquireSlot(ctx context.Context, batch bool, maxWait time.Duration) (SlotLease, time.Duration, error)
	// ReleaseSlot gives back a slot that AcquireSlot returned.
	ReleaseSlot(lease SlotLease)
}
