package cache

import "github.com/llmclient/llmclient/health"

// Stats is a snapshot of a cache's statistics: what it served, and what its store holds
// when the store reports it (StatsReporter).
type Stats struct {
	// Hits and Misses count exact-cache lookups; Bypasses the lookups a Control skipped.
	Hits, Misses, Bypasses uint64
	// Stored counts answers written to the store (an answer kept in the exact cache and
	// under an idempotency key counts twice; one the store declined as larger than its
	// own bound counts here and in Store.Rejected); NotStored the answers that were not
	// storable (degraded, filtered, refused, cut, closed early, too large).
	Stored, NotStored uint64
	// Shared counts calls answered by joining an identical call in flight; Replays calls
	// answered with the first answer under their idempotency key.
	Shared, Replays uint64
	// StoreErrors counts failed or timed-out store calls.
	StoreErrors uint64
	// InFlight is the number of shared or idempotent calls in flight now.
	InFlight int
	// Store is what the store reports, zero when it reports nothing.
	Store StoreStats
}

// HitRate is Hits / (Hits + Misses), 0 before any lookup.
func (s Stats) HitRate() float64 {
	if n := s.Hits + s.Misses; n > 0 {
		return float64(s.Hits) / float64(n)
	}
	return 0
}

// Stats returns the cache's statistics so far. It is cheap (atomic loads and the store's
// own report) and safe to call concurrently, for a metrics exporter or a health endpoint.
func (c *Cache) Stats() Stats {
	s := Stats{Hits: c.stats.hits.Load(), Misses: c.stats.misses.Load(), Bypasses: c.stats.bypasses.Load(),
		Stored: c.stats.stored.Load(), NotStored: c.stats.notStored.Load(), Shared: c.stats.shared.Load(),
		Replays: c.stats.replays.Load(), StoreErrors: c.stats.storeErrors.Load(), InFlight: c.flights.inFlight()}
	if r, ok := c.store.(StatsReporter); ok {
		s.Store = r.StoreStats()
	}
	return s
}

// Health returns the cache's statistics as a Client's Snapshot reports them: register it
// with llmclient.WithCacheStats(name, c.Health). Entries, Bytes, Evictions, Expired and
// Rejected are the store's, zero when it reports none (StatsReporter). Safe to call
// concurrently.
func (c *Cache) Health() health.Cache {
	s := c.Stats()
	return health.Cache{Hits: s.Hits, Misses: s.Misses, Bypasses: s.Bypasses, HitRate: s.HitRate(),
		Stored: s.Stored, NotStored: s.NotStored, Shared: s.Shared, Replays: s.Replays, Errors: s.StoreErrors,
		Entries: s.Store.Entries, Bytes: s.Store.Bytes, Evictions: s.Store.Evictions, Expired: s.Store.Expired,
		Rejected: s.Store.Rejected, InFlight: s.InFlight}
}
