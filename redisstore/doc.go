// Package redisstore keeps llmclient's limiter state in Redis, so that several replicas
// that use the same API keys admit against one quota instead of one quota each.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	store, err := redisstore.New(rdb, redisstore.WithPrefix("myapp"))
//	if err != nil { ... }
//	defer store.Close()
//	client, err := llmclient.New(llmclient.WithLimitStore(store), ...)
//
// What is shared, per scope (an API key or a caller partition): the request, token and
// daily buckets, updated by one server-side Lua script per operation on the Redis server's
// clock (GCRA: one number per bucket), reconciliation of estimated against reported
// usage, the upstreams' rate-limit reports (each applied once, whichever replica reads
// it) and the charge fit, limits learned from headers, the pause a 429 puts on a key and
// a key's eviction (also for keys without limits), and the concurrency slots and the
// output held in flight by calls that run (limitstore.Reservation.InFlight), which are
// leases that expire unless the holding process renews them. The scripts are a port of
// limitstore's in-memory state, with the same bounds.
// Every key of a scope shares one hash tag, {prefix:scope}, so each script touches one
// Redis Cluster slot.
//
// Each call to Redis is bounded by a timeout (DefaultTimeout) and by the caller's deadline,
// and a reply slower than a quarter of the timeout counts as a failure. When a call fails,
// the store stops calling Redis for a probe interval and either admits against an
// in-process limiter (FailOpen, the default) or refuses at once with an error wrapping
// ErrUnavailable (FailClosed); then one request probes Redis, and the store goes back to it
// when it answers in time. A slot given back, or a waiter's place in the slot queue, goes to
// Redis without holding the caller.
//
// The Store also keeps the open periods of shared breakers (limitstore.Breakers, for
// llmclient.WithSharedBreakers: one key per upstream) and budget ledgers
// (limitstore.BudgetStore, for llmclient.WithBudget; see BUDGETS.md). Without
// WithSharedBreakers each process keeps its own breakers.
//
// Every amount a caller passes (a request's token cost, a usage report, a pause, an
// eviction, a report's counts, a scope's rates) is clamped before a script runs and again
// inside it, as MaxCharge, MaxPause and WaitHorizon describe, so that no number can make a
// script fail (which would mark Redis down for every scope) or lock a scope for long.
//
// New takes any go-redis client: a single server, a Sentinel-managed master, a Cluster or
// a Ring (see New for what each implies), over TLS when the client is configured for it.
// The README describes every key the store writes.
package redisstore
