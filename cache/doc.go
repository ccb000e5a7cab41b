// Package cache pays once for an answer: an exact response cache scoped per partition,
// in-flight de-duplication, idempotency keys, and a semantic cache behind an embedder
// interface with guard rules. Each is middleware (llmclient.Middleware) and runs outside
// every layer of the Client:
//
//	Cache (exact, dedup, idempotency) → Semantic → limiter, retry, breaker, failover … → adapter
//
// # Exact cache
//
// Key hashes everything in a Request that reaches the vendor; the model is the name the
// caller sends (a model or a model group), because middleware runs before routing: use
// WithNamespace when an upstream's model mapping changes. Entries are scoped per partition
// (WithPartition, PartitionByMetadata): tenants never share an answer. Only successful
// answers are stored: not a degraded one (WithFallback's), not a filtered or refused one,
// not a stream that was cut, failed, closed early or grew past WithMaxEntryBytes. A
// stream's answer is stored with the content the caller read, also when the Client keeps
// none in the stream's Response (llmclient.WithStreamAccumulate(false)). A
// fallback to another upstream (Response.Fallback) is a real answer and is stored.
//
// A hit returns a copy of the stored Response marked Cached, with no Attempts (no upstream
// call was made), no RateLimits, a Cost of a known $0, and the Usage of the call that
// produced it: no tokens were spent for a hit. A Stream call served from the cache
// replays the recorded chunks one by one (llmclient.StreamOf); an answer stored by
// Complete replays as one chunk. Per call, a Control (WithControl) asks for no-cache,
// no-store or a max-age, as HTTP's Cache-Control request directives do. Store is the
// storage interface: NewMemory keeps entries in process (LRU by bytes, with TTL and entry
// and total bounds), and the nested module github.com/llmclient/llmclient/rediscache
// keeps them in Redis, shared by replicas. A call does not wait for the store of its
// answer, made behind it within the store timeout (WithStoreTimeout): a slow store never
// holds an answer. Flush waits for the stores under way; call it before closing the
// store's client.
//
// # De-duplication
//
// With WithDedup(true), identical Complete calls in flight at the same time share one
// upstream call, which runs on a context detached from each caller's cancellation: a
// caller that cancels returns at once and the others keep waiting; the call is canceled
// when every waiter has gone, or at the latest deadline among them (the Client's layers
// see no deadline on it; WithAttemptTimeout still bounds each attempt). The shared call
// carries the first caller's context values (tracing, partition). Streams are not
// de-duplicated: a follower would need a live Stream fed by another reader, which
// llmclient does not offer (StreamOf replays a finished recording), and holding followers
// until the leader's stream ends would cost them all their time to first token; the
// leader's pace and early Close would also decide theirs. A stream repeated after its
// first copy ended is served from the cache. Every caller of a shared call gets a copy of
// its Response, Attempts and Cost included: the cost of the one upstream call, which the
// Client's budgets count once. A caller that adds up Response.Cost across its calls
// counts a shared call once per caller; EventShared marks the followers.
//
// # Idempotency keys
//
// WithIdempotencyKey marks a call with a key of the caller's (a job id, a message id). The
// first Complete call under a key runs detached from its caller's cancellation, and on
// for up to the idempotency window (WithIdempotencyTTL) once no caller waits for it: when
// its caller times out and repeats the call with the same key, the repeat joins the call
// in flight, or gets its answer once it has arrived, instead of paying for a second
// generation. A key reused for a different request is refused with
// ErrIdempotencyMismatch: one that reaches the vendor otherwise, or carries other key
// metadata (WithKeyMetadata). During a rolling deploy that changes WithKeyMetadata or the
// key's encoding, a repeat replays the first answer, or is a miss when the two builds
// cannot tell whether it is the same request; it is not refused. Keys are scoped per
// partition. Across replicas, an arrived answer is shared through a shared Store once it
// is stored (a Redis round trip after it arrived: a repeat on another replica that comes
// sooner misses it); a call in flight, or whose answer is being stored, is joined only
// within its process. A Stream call under a key replays an arrived answer, waits for
// a Complete in flight under it, but is not itself detached: a stream its caller abandons
// is cut and its answer does not arrive.
//
// What a key can save depends on the vendor, because no vendor of the built-in adapters
// honours an idempotency key on its chat endpoint (as of mid-2026), so none of them is
// sent one: an Idempotency-Key header would imply a guarantee the server does not give.
//
//   - OpenAI: no idempotency header is documented for Chat Completions or Responses, and
//     the official SDKs send none (openai-python's base client leaves its idempotency
//     header unset; openai-go sets none). A request canceled after it reached OpenAI may
//     still be generated and billed, and its answer cannot be fetched afterwards unless
//     it was stored (Chat Completions store: true can be listed by metadata; a Responses
//     call with store or background mode can be fetched by id, which a timed-out caller
//     may never have received).
//   - Azure OpenAI: the same API and the same absence of an idempotency key.
//   - Anthropic: the Messages API does not honour an idempotency key; the TypeScript SDK's
//     maintainers leave its Idempotency-Key header unset on purpose for that reason
//     (anthropics/anthropic-sdk-typescript#1112, #1144). A canceled request may still be
//     billed.
//   - Gemini API and Vertex AI: generateContent has no idempotency key; the go-genai SDK
//     sends none.
//   - DeepSeek: OpenAI-compatible, no idempotency key documented. Under load it keeps a
//     request open for minutes before inference starts, so a client timeout may come
//     before any token was generated, or after it was paid for.
//
// So this package saves what can be saved on the client side: the repeat of a call whose
// answer does arrive, because the first call is kept running past its caller's timeout.
// It cannot recover an answer whose HTTP request was canceled (by a crash, a process
// restart, or the window running out): that answer may have been billed and no client can
// get it back.
//
// # Semantic cache
//
// NewSemantic answers a question asked in other words with the answer to a similar one:
// it embeds the last user message with an Embedder, compares it by cosine similarity with
// the questions cached for the same partition and the same rest of the request, and
// accepts the most similar one at or above the threshold that every Guard accepts
// (RequireSameTerms, MinTermOverlap, or a predicate of your own). Questions that are near
// but different, such as "how do I get a refund" and "how do I return an item", are close
// in most embedding models; the guards send them to the model. Hits, misses and guard
// rejections are reported to the observer (WithObserver) and counted in Stats.
// ClientEmbedder embeds the questions with llmclient.Client.Embed, through the Client's
// layers. The index is bounded in questions (WithMaxEntries, 10,000 by default) and in
// bytes (WithMaxSemanticBytes, 64 MiB by default), whatever the model and the embedder
// send: embeddings longer than MaxEmbeddingDimensions are refused.
//
// # Events and statistics
//
// Every cache reports to the observer WithObserver gives it. ClientEvents turns that into
// a Client's observer: hits, misses, guard rejections and stores arrive there as
// llmclient.EventCacheHit, EventCacheMiss, EventCacheGuardRejected and EventCacheStored,
// beside the Client's own events (the otel module counts them in llmclient.cache.lookups;
// slogobserver logs them). A response served from a cache is marked
// llmclient.Response.Cached.
//
// Cache.Stats and Semantic.Stats return counters (hits, misses, hit rate, stores,
// evictions, bytes and entries; for the exact cache, through the store's StoreStats) for a
// metrics exporter or a snapshot endpoint. Cache.Health and Semantic.Health return them as
// a health.Cache: register them with llmclient.WithCacheStats, and the Client's Snapshot
// (and so the otel module's Watch gauges) reports them.
package cache
