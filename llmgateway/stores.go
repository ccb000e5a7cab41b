package llmgateway

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/rediscache"
	"github.com/llmclient/llmclient/redisstore"
	"github.com/redis/go-redis/v9"
)

// cacheFlushTimeout bounds how long a shutdown waits for the response cache's answers
// still being stored (each store is bounded by the cache's own store timeout anyway).
const cacheFlushTimeout = 5 * time.Second

// sharedBreakers says whether breaker.shared shares any breaker, and whose: names nil
// for every upstream's ("*").
func (c *Config) sharedBreakers() (names []string, ok bool) {
	b := c.Breaker
	if b == nil || len(b.Shared) == 0 {
		return nil, false
	}
	if slices.Contains(b.Shared, "*") {
		return nil, true
	}
	return b.Shared, true
}

// storeOptions makes the shared stores the configuration asks for (redis for limits,
// key pauses, budgets and breakers; the response cache) and returns the Client's
// options for them and what closes them, in the order they were made.
func (c *Config) storeOptions() ([]llmclient.Option, []func() error, error) {
	var (
		opts    []llmclient.Option
		closers []func() error
		rdb     *redis.Client
	)
	if rc := c.Redis; rc != nil {
		rdb = redis.NewClient(&redis.Options{Addr: rc.Addr, Password: rc.password, DB: rc.DB, ContextTimeoutEnabled: true})
		closers = append(closers, rdb.Close)
		var sopts []redisstore.Option
		if rc.Prefix != "" {
			sopts = append(sopts, redisstore.WithPrefix(rc.Prefix))
		}
		if rc.FailMode == "closed" {
			sopts = append(sopts, redisstore.WithFailMode(redisstore.FailClosed))
		}
		if rc.Timeout > 0 {
			sopts = append(sopts, redisstore.WithTimeout(rc.Timeout.D()))
		}
		st, err := redisstore.New(rdb, sopts...)
		if err != nil {
			return nil, closers, fmt.Errorf("redis: %w", err)
		}
		closers = append(closers, st.Close)
		opts = append(opts, llmclient.WithLimitStore(st))
		if names, ok := c.sharedBreakers(); ok {
			opts = append(opts, llmclient.WithSharedBreakers(names...))
		}
	}
	if cc := c.Cache; cc.Enabled {
		var store cache.Store
		if cc.Redis {
			var ropts []rediscache.Option
			if c.Redis.Prefix != "" {
				ropts = append(ropts, rediscache.WithPrefix(c.Redis.Prefix+":cache:"))
			}
			rs, err := rediscache.New(rdb, ropts...)
			if err != nil {
				return nil, closers, fmt.Errorf("cache: %w", err)
			}
			store = rs
		} else {
			ms, err := cache.NewMemory(cache.MemoryConfig{MaxBytes: cc.MaxBytes, MaxEntries: cc.MaxEntries})
			if err != nil {
				return nil, closers, fmt.Errorf("cache: %w", err)
			}
			store = ms
		}
		copts := []cache.Option{cache.WithDedup(cc.Dedup)}
		if cc.TTL > 0 {
			copts = append(copts, cache.WithTTL(cc.TTL.D()))
		}
		ca, err := cache.New(store, copts...)
		if err != nil {
			return nil, closers, fmt.Errorf("cache: %w", err)
		}
		opts = append(opts, llmclient.WithMiddleware(ca.Middleware()), llmclient.WithCacheStats("responses", ca.Health))
		// The answers still being stored are written before the store's client closes
		// (closers run in reverse), within the cache's store timeout.
		closers = append(closers, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), cacheFlushTimeout)
			defer cancel()
			return ca.Flush(ctx)
		})
	}
	return opts, closers, nil
}
