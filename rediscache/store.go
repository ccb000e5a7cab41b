package rediscache

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient/cache"
	"github.com/redis/go-redis/v9"
)

// Defaults of the options.
const (
	// DefaultPrefix starts every key the store writes.
	DefaultPrefix = "llmclient:cache:"
	// DefaultMaxEntryBytes is the largest encoded entry stored by default.
	DefaultMaxEntryBytes = 1 << 20
)

// Store is a cache.Store in Redis. It is safe for concurrent use; several processes may
// share one Redis.
type Store struct {
	rdb      redis.UniversalClient
	prefix   string
	maxEntry int

	rejected, corrupt atomic.Uint64
}

// Option configures a Store.
type Option interface{ apply(*Store) }

type optionFunc func(*Store)

func (f optionFunc) apply(s *Store) { f(s) }

// WithPrefix sets the prefix of every key, to keep several caches (or other data) apart
// in one Redis. Default DefaultPrefix.
func WithPrefix(p string) Option { return optionFunc(func(s *Store) { s.prefix = p }) }

// WithMaxEntryBytes bounds an entry's encoded size: a larger entry is not stored
// (StoreStats.Rejected counts it). It must be positive and at most
// cache.MaxEncodedEntry. Default DefaultMaxEntryBytes (1 MiB).
func WithMaxEntryBytes(n int) Option { return optionFunc(func(s *Store) { s.maxEntry = n }) }

// New returns a Store over rdb. The caller keeps ownership of rdb and closes it.
//
// rdb must have ContextTimeoutEnabled set: go-redis otherwise ignores the deadline of
// the context, so the cache's store timeout (cache.WithStoreTimeout) would not bound a
// Redis that does not answer, and each lookup and store would hold the call for the
// client's ReadTimeout (3s by default) and more. New returns an error when it can see
// that it is not (a *redis.Client, *redis.ClusterClient or *redis.Ring).
func New(rdb redis.UniversalClient, opts ...Option) (*Store, error) {
	if rdb == nil {
		return nil, errors.New("llmclient/rediscache: nil Redis client")
	}
	if on, known := contextTimeouts(rdb); known && !on {
		return nil, errors.New("llmclient/rediscache: the Redis client must set ContextTimeoutEnabled, or a Redis that does not answer would hold calls past the cache's store timeout")
	}
	s := &Store{rdb: rdb, prefix: DefaultPrefix, maxEntry: DefaultMaxEntryBytes}
	for _, o := range opts {
		if o != nil {
			o.apply(s)
		}
	}
	if s.maxEntry <= 0 || s.maxEntry > cache.MaxEncodedEntry {
		return nil, fmt.Errorf("llmclient/rediscache: max entry bytes %d is not in [1, %d]", s.maxEntry, cache.MaxEncodedEntry)
	}
	return s, nil
}

// contextTimeouts reports whether the client bounds calls by their context, when its
// options can be read.
func contextTimeouts(rdb redis.UniversalClient) (on, known bool) {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled, true
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled, true
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled, true
	}
	return false, false
}

// Get returns the entry under key, nil when there is none. An entry that does not decode
// (written by another version, or damaged) is an error wrapping cache.ErrCorruptEntry,
// which the cache treats as a miss; the next answer overwrites it. It reads at most one
// byte more than the store's entry bound (WithMaxEntryBytes) of the value, whatever Redis
// holds under key (a string may be 512 MB): a longer value, which this store never
// writes, is corrupt too (so is an entry written by a process whose bound is larger).
func (s *Store) Get(ctx context.Context, key string) (*cache.Entry, error) {
	// GETRANGE answers "" for a missing key, where GET answers nil; an empty value is
	// no entry either. Its end is inclusive: maxEntry+1 bytes at most.
	data, err := s.rdb.GetRange(ctx, s.prefix+key, 0, int64(s.maxEntry)).Bytes()
	if err != nil {
		return nil, fmt.Errorf("llmclient/rediscache: get: %w", err)
	}
	if len(data) == 0 {
		return nil, nil
	}
	if len(data) > s.maxEntry {
		s.corrupt.Add(1)
		return nil, fmt.Errorf("%w: more than the store's bound of %d bytes", cache.ErrCorruptEntry, s.maxEntry)
	}
	e, err := cache.UnmarshalEntry(data)
	if err != nil {
		s.corrupt.Add(1)
		return nil, err
	}
	return e, nil
}

// Set stores e under key for ttl, rounded up to a whole millisecond (Redis's unit). A
// ttl that is not positive deletes the key; so does an entry larger than the bound (or
// with more chunks than cache.UnmarshalEntry reads), which is not stored (as in the
// memory store: a newer answer that cannot be kept does not leave the one it replaces).
func (s *Store) Set(ctx context.Context, key string, e *cache.Entry, ttl time.Duration) error {
	if ttl <= 0 {
		return s.del(ctx, key)
	}
	data, err := cache.MarshalEntry(e) // it refuses only more chunks than an entry holds
	if err != nil || len(data) > s.maxEntry {
		s.rejected.Add(1)
		return s.del(ctx, key)
	}
	if err := s.rdb.Set(ctx, s.prefix+key, data, ceilMillisecond(ttl)).Err(); err != nil {
		return fmt.Errorf("llmclient/rediscache: set: %w", err)
	}
	return nil
}

func (s *Store) del(ctx context.Context, key string) error {
	if err := s.rdb.Del(ctx, s.prefix+key).Err(); err != nil {
		return fmt.Errorf("llmclient/rediscache: del: %w", err)
	}
	return nil
}

// ceilMillisecond rounds a positive ttl up to a whole millisecond, the unit of PX; the
// longest Durations, whose next whole millisecond is past the longest Duration, are
// rounded down instead.
func ceilMillisecond(ttl time.Duration) time.Duration {
	up := ttl.Truncate(time.Millisecond)
	if up < ttl && up <= math.MaxInt64-time.Millisecond {
		up += time.Millisecond
	}
	return up
}

// StoreStats reports the entries this process declined as larger than its bound
// (Rejected); Corrupt counts those it found corrupt, which StoreStats has no field for.
// Expired is not tracked: Redis expires entries itself. Entries, Bytes and Evictions
// are Redis's to tell, shared by every process: read them from INFO (keyspace,
// used_memory, evicted_keys); they stay 0 here.
func (s *Store) StoreStats() cache.StoreStats {
	return cache.StoreStats{Rejected: s.rejected.Load()}
}

// Corrupt counts the entries Get could not decode.
func (s *Store) Corrupt() uint64 { return s.corrupt.Load() }

var _ cache.Store = (*Store)(nil)
var _ cache.StatsReporter = (*Store)(nil)
