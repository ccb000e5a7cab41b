package cache

import (
	"context"
	"time"
)

// EventKind says what an Event reports.
type EventKind uint8

// The event kinds.
const (
	// EventHit: a call was answered from the cache (Age: the entry's age; Similarity:
	// for the semantic cache, the cosine similarity of the matched question).
	EventHit EventKind = iota + 1
	// EventMiss: the cache had no usable entry; the call goes on to the upstream.
	EventMiss
	// EventBypass: a Control (NoCache, NoStore, a negative MaxAge) skipped the lookup,
	// or the semantic cache could not use the request (no user question in text).
	EventBypass
	// EventStored: an answer was stored.
	EventStored
	// EventNotStored: an answer was not stored: unsuccessful, degraded, filtered or
	// refused, cut, closed early, or larger than the entry bound (Err says which).
	EventNotStored
	// EventShared: the call joined an identical call in flight instead of calling the
	// upstream (de-duplication, or a repeated idempotency key).
	EventShared
	// EventReplay: a call with an idempotency key was answered with the stored answer
	// of the first call under that key.
	EventReplay
	// EventGuardRejected: the semantic cache found a similar question (Similarity) but a
	// guard rule rejected it; the call goes on to the upstream.
	EventGuardRejected
	// EventStoreError: the store or the embedder failed (Err); the cache carried on as
	// for a miss, or without storing.
	EventStoreError
)

var eventKindNames = [...]string{"", "hit", "miss", "bypass", "stored", "not_stored", "shared", "replay",
	"guard_rejected", "store_error"}

// String returns the kind's snake_case name.
func (k EventKind) String() string {
	if int(k) < len(eventKindNames) {
		return eventKindNames[k]
	}
	return "event"
}

// Event is what a cache tells its observer (see WithObserver). Fields that do not apply
// to a kind are zero.
type Event struct {
	Kind EventKind
	// Semantic is true for events of the semantic cache.
	Semantic bool
	// Partition is the call's partition and Model its Request.Model.
	Partition string
	Model     string
	// Stream is true for Stream calls.
	Stream bool
	// Age is a hit's entry age.
	Age time.Duration
	// Similarity is the semantic cache's best cosine similarity, for hits, misses with a
	// candidate, and guard rejections.
	Similarity float64
	// Err is the reason for EventNotStored and EventStoreError.
	Err error
}

// observer is the callback WithObserver sets.
type observer func(context.Context, Event)

func (o observer) emit(ctx context.Context, e Event) {
	if o != nil {
		o(ctx, e)
	}
}
