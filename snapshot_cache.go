package llmclient

import (
	"fmt"

	"github.com/llmclient/llmclient/health"
)

// cacheStats is one cache registered with WithCacheStats.
type cacheStats struct {
	name  string
	stats func() health.Cache
}

// WithCacheStats registers a cache's statistics with Client.Snapshot, under name: each
// Snapshot calls stats (without holding any lock of the Client's) and reports its result,
// with Name set to name, in Snapshot.Caches, where the otel module's Watch reads them.
// Package cache provides stats: Cache.Health and Semantic.Health.
//
//	c, _ := cache.New(store)
//	client, _ := llmclient.New(
//		llmclient.WithMiddleware(c.Middleware()),
//		llmclient.WithCacheStats("responses", c.Health),
//		...)
//
// stats must be safe for concurrent use and return quickly. name must not be empty, and
// names must be unique; a nil stats is an error. Registering the same cache with several
// Clients reports it in each of their snapshots. Default: none.
func WithCacheStats(name string, stats func() health.Cache) Option {
	return optionFunc(func(c *config) { c.caches = append(c.caches, cacheStats{name: name, stats: stats}) })
}

func (c *config) validateCaches() []error {
	var errs []error
	seen := make(map[string]bool, len(c.caches))
	for i, cs := range c.caches {
		switch {
		case cs.name == "":
			errs = append(errs, fmt.Errorf("WithCacheStats %d: empty name", i+1))
		case seen[cs.name]:
			errs = append(errs, fmt.Errorf("WithCacheStats: cache %q registered twice", cs.name))
		}
		seen[cs.name] = true
		if cs.stats == nil {
			errs = append(errs, fmt.Errorf("WithCacheStats %q: nil stats function", cs.name))
		}
	}
	return errs
}

// cacheSnapshot is the caches' part of Snapshot; nil without any.
func (c *Client) cacheSnapshot() []health.Cache {
	if len(c.cfg.caches) == 0 {
		return nil
	}
	out := make([]health.Cache, 0, len(c.cfg.caches))
	for _, cs := range c.cfg.caches {
		h := cs.stats()
		h.Name = cs.name
		out = append(out, h)
	}
	return out
}
