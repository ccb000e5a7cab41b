// Package rediscache keeps llmclient/cache entries in Redis, so that every replica of a
// service shares one exact cache and one idempotency window: an answer one replica paid
// for serves the others, and a repeated idempotency key finds the first answer wherever
// it arrived.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	store, _ := rediscache.New(rdb)
//	c, _ := cache.New(store, cache.WithPartition(cache.PartitionByMetadata("tenant")))
//
// Entries are stored with SET … PX under "<prefix><key>" in cache.MarshalEntry's
// encoding; Redis expires them, and evicts them under its own maxmemory policy (set one:
// volatile-lru or allkeys-lru). A Redis that fails or does not answer within the cache's
// store timeout (cache.WithStoreTimeout) costs a miss, never a failed or held call (the
// client must set ContextTimeoutEnabled, which New checks): an answer is stored behind
// its call. Call the cache's Flush before closing rdb, so that the last answers are kept.
// It is a nested module so that the core llmclient module does not depend on go-redis.
package rediscache
