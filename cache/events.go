package cache

import (
	"context"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
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
	// EventStored: an answer was stored (the store took it without an error; a store
	// may still decline an entry larger than its own bound: StoreStats.Rejected).
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
	// Similarity is the semantic cache's cosine similarity: of the matched question for
	// hits, of the most similar one for guard rejections, and for misses of the most
	// similar question compared (below the threshold; 0 when there was none to compare).
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

// ClientEvents returns an observer for WithObserver that reports the cache's lookups and
// stores to f, a Client's observer (what llmclient.WithObserver was given, such as the
// otel module's Telemetry.Observe), as llmclient events: EventHit as
// event.CacheHit, EventMiss as event.CacheMiss, EventGuardRejected as
// event.CacheGuardRejected and EventStored as event.CacheStored, with Semantic, Similarity,
// Age, Partition and Model; other cache events are not passed on. So the cache, which is
// middleware and runs before the Client begins a call, reports through the Client's own
// observer; its events carry CallID 0. To observe the cache's events yourself as well,
// call both from one function.
//
//	obs := tel.Observe
//	c, _ := cache.New(store, cache.WithObserver(cache.ClientEvents(obs)))
//	client, _ := llmclient.New(llmclient.WithObserver(obs), llmclient.WithMiddleware(c.Middleware()), ...)
func ClientEvents(f func(context.Context, llmclient.Event)) func(context.Context, Event) {
	if f == nil {
		return nil
	}
	return func(ctx context.Context, e Event) {
		var kind event.Kind
		switch e.Kind {
		case EventHit:
			kind = event.CacheHit
		case EventMiss:
			kind = event.CacheMiss
		case EventGuardRejected:
			kind = event.CacheGuardRejected
		case EventStored:
			kind = event.CacheStored
		default:
			return
		}
		f(ctx, llmclient.Event{Kind: kind, Time: time.Now(), Semantic: e.Semantic, Similarity: e.Similarity,
			Age: e.Age, Partition: e.Partition, Model: e.Model})
	}
}
