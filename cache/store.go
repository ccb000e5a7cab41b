package cache

import (
	"context"
	"time"
)

// Store keeps exact-cache entries by key. Implementations must be safe for concurrent use
// and must not modify an Entry after Set or after returning it from Get. NewMemory is the
// in-process implementation; github.com/llmclient/llmclient/rediscache keeps entries in
// Redis, shared by replicas.
//
// Get and Set must return when their context ends: the store timeout (WithStoreTimeout)
// and the caller's deadline reach a store only through that context, and the cache
// calls Get on the goroutine of the call (and Set too, when the store timeout is 0), so
// a Get that ignores its context holds the call for as long as it blocks. rediscache honours it (it requires a go-redis client
// with ContextTimeoutEnabled).
type Store interface {
	// Get returns the entry stored under key, or nil and a nil error when there is none
	// (or it expired). An error means the store could not answer; the cache then calls
	// the upstream as for a miss.
	Get(ctx context.Context, key string) (*Entry, error)
	// Set stores e under key for ttl (> 0), replacing any entry there. A store may
	// decline an entry (too large, say) without an error.
	Set(ctx context.Context, key string, e *Entry, ttl time.Duration) error
}

// StoreStats is what a store reports of its contents.
type StoreStats struct {
	// Entries and Bytes are what the store holds now (Bytes as Entry.Size counts it, or
	// as the store encodes it).
	Entries int64
	Bytes   int64
	// Evictions counts entries dropped to make room; Expired those dropped because
	// their TTL had passed; Rejected entries the store declined (too large).
	Evictions uint64
	Expired   uint64
	Rejected  uint64
}

// StatsReporter is an optional capability of a Store: reporting its contents. Cache.Stats
// includes the store's StoreStats when its Store implements it.
type StatsReporter interface {
	StoreStats() StoreStats
}
