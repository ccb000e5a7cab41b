// Package otel is llmclient's OpenTelemetry instrumentation: spans and metrics that
// follow the OpenTelemetry semantic conventions for generative AI, and llmclient's own
// metrics of its layers. It lives in a module of its own, so the core module never
// depends on OpenTelemetry; a Client that does not use it pays nothing.
//
//	import llmotel "github.com/llmclient/llmclient/otel"
//
//	tel, err := llmotel.New(llmotel.WithTracerProvider(tp), llmotel.WithMeterProvider(mp))
//	client, err := llmclient.New(
//		llmclient.WithObserver(tel.Observe),
//		llmclient.WithMiddleware(tel.Middleware),
//		llmclient.WithUpstream(...),
//	)
//	reg, err := tel.Watch(client) // gauges of breakers, keys and limiters; reg.Unregister() to stop
//	hc := &http.Client{Transport: tel.Transport(client.Transport(nil))} // transport mode
//
// # Spans
//
// One span per call, kind CLIENT, named "{gen_ai.operation.name} {gen_ai.request.model}"
// ("chat gpt-4o"), from the call's start to its end (a stream's end or close; for a
// stream dropped without Close, once the garbage collector finds it, with error.type
// canceled: the Client's own streams end their calls then, and Middleware ends the span
// of one that inner middleware made, a cache's replay, itself), with:
// gen_ai.operation.name ("chat"; in transport mode "embeddings" and "generate_content" for
// those API paths), gen_ai.provider.name, gen_ai.request.model, gen_ai.request.max_tokens,
// gen_ai.request.temperature, gen_ai.request.top_p, gen_ai.response.model,
// gen_ai.response.finish_reasons, gen_ai.usage.input_tokens, gen_ai.usage.output_tokens,
// error.type and an error status when the call failed, http.response.status_code, and
// llmclient.upstream (the upstream that served, or the last one tried),
// llmclient.attempts, llmclient.call_id, llmclient.partition, llmclient.fallback, and for
// streams llmclient.time_to_first_chunk (seconds) and llmclient.chunks. Failovers, key
// cooldowns and evictions, alerts, fallbacks, hedges and stream continuations are span
// events named "llmclient.failover", "llmclient.key_cooldown", "llmclient.hedge", ...,
// "llmclient.continuation" (with llmclient.upstream, llmclient.target, error.type and
// llmclient.action: prefill or restart). A continued stream is one call span: its
// attempts, the broken one and the continuation, are attempt spans under it, and its
// usage, chunks and time to first chunk are the whole stream's.
// A sampler sees gen_ai.operation.name and gen_ai.request.model at the span's start: the
// attributes the conventions call sampling-relevant that are known then (the provider is
// known once an upstream is chosen). The request's max_tokens, temperature and top_p are
// given to a recorded span with the attributes of its end, and cost an unrecorded one
// nothing. A call that panics under Middleware or Transport (an observer given before
// Observe that panicked on one of the call's events, a middleware) ends its span as the
// panic passes, with error.type "_OTHER" and the status description "panic"; the panic
// goes on unchanged.
//
// Under it, one span per attempt, kind INTERNAL, named "attempt {upstream}", from the
// attempt's start (after the backoff before it; its own waits for keys and the limiter
// included) to its end, with gen_ai.operation.name, gen_ai.provider.name,
// gen_ai.request.model (the upstream's model name), gen_ai.usage.*, error.type,
// http.response.status_code, and llmclient.upstream, llmclient.attempt (its number),
// llmclient.key (a label, never the key), llmclient.waited and llmclient.limiter_wait
// (seconds), llmclient.local (refused without an upstream call: open breaker, limiter,
// no key), llmclient.retry (a retry of the same upstream), llmclient.hedge (a hedged
// attempt, see llmclient.Hedge), llmclient.failover (the first
// attempt after a failover), llmclient.estimated_tokens and llmclient.time_to_first_chunk.
//
// Attempt spans follow their call span's sampling: a call span that is not recorded has
// none, and its call costs the span's start and end and nothing else (the call's metrics
// are recorded all the same). They are made from the Client's events, after each attempt ended, with its
// timestamps; so spans that code under an attempt starts (an adapter's instrumented HTTP
// client) are children of the call span, not of the attempt. Spans need Middleware (typed
// calls) or Transport (transport mode): Observe alone records metrics only.
//
// No span, event or metric holds prompt or completion text. A failed span's status
// description names the failure from fields that hold none ("llmclient: bad_request:
// upstream "a": status 422: invalid_value", with the cause when it is a sentinel, context
// or network error, by that error's own text, never by that of an error that wraps it):
// the vendor's message and the start of an error or malformed body,
// which can quote the prompt or the completion, are left out unless WithErrorMessages
// opts in.
//
// String attribute values and the model in a call span's name are cut to MaxValueLen
// (256) bytes, at a rune boundary, ending with "…": model names come from callers, and
// each distinct value is kept for the process's life. A call or attempt that failed
// because its model is unknown (failure.NotFound) carries no model at all, so that names
// that route nowhere add no series. At most 4,096 attribute sets are
// cached (beyond, a set is built for each use); adding one copies a 256th of the cache.
//
// # Metrics
//
// The GenAI client metrics, with the bucket boundaries the conventions recommend, and the
// attributes gen_ai.operation.name, gen_ai.provider.name, gen_ai.request.model,
// gen_ai.response.model, error.type (failed calls) and llmclient.upstream. The response
// model is the upstream's to name (a router, or a vendor that names a new model in each
// answer, would add a series to every call instrument with each one, until the SDK's
// cardinality limit sent every later series, alarms' included, to otel.metric.overflow):
// the metrics keep the first 8 response models of each upstream and request model by name
// and record the others as "_OTHER" (the conventions make the attribute Recommended on
// metrics, not Required); the call span always has the name the upstream gave.
//
//   - gen_ai.client.operation.duration (s): every call, from its start to its end.
//   - gen_ai.client.token.usage ({token}, with gen_ai.token.type input or output): calls
//     whose usage the upstream reported; with WithEstimatedUsage(true), also those whose
//     counts are the Client's estimate (an answer or stream without usage, a stream cut or
//     closed before its report), which spans mark llmclient.usage_estimated.
//   - gen_ai.client.operation.time_to_first_chunk (s): streams, from the call's start
//     (its retries before the first token included) to its first content chunk.
//   - gen_ai.client.operation.time_per_output_chunk (s): streams, one value per chunk
//     after the first. The Client times a stream as a whole, so each value is the
//     stream's mean time per chunk: the count and the sum are exact, the spread within a
//     stream is not kept.
//
// llmclient's own:
//
//   - llmclient.client.attempts ({attempt}): upstream calls, by llmclient.upstream,
//     gen_ai.provider.name, gen_ai.request.model, error.type and
//     http.response.status_code. Retry amplification is its rate over that of
//     gen_ai.client.operation.duration's count; the 429 share its share with
//     error.type "rate_limited". An observable counter: the module counts each attempt
//     with an atomic add and reports the totals at each collection (no exemplars), which
//     spares every attempt a synchronous measurement; attributes beyond 4,096 distinct
//     sets are counted under otel.metric.overflow=true.
//   - llmclient.client.refusals ({attempt}): attempts refused locally, by
//     llmclient.upstream, error.type and llmclient.reason (breaker_open, limiter, no_key,
//     retry_budget, budget, unsupported, no_upstream, other). budget is a refusal of the
//     budget layer (package budget), whose error.type says which: budget_exceeded (a
//     cap), unpriced (UnpricedRefuse) or unavailable (a Failover rule's costlier
//     upstream).
//   - llmclient.client.attempts_per_call ({attempt}, histogram): per call, local
//     refusals included; the call metrics' attributes.
//   - llmclient.limiter.wait (s, histogram): the wait of every attempt that waited in
//     the Client's admission (caller partition, cooling keys, the key's limiter), by
//     llmclient.upstream and llmclient.key; the share of attempts that waited is its
//     count over llmclient.client.attempts plus refusals.
//   - llmclient.client.failovers, llmclient.client.hedges and
//     llmclient.client.continuations (by llmclient.upstream, llmclient.target,
//     error.type; a continuation: a committed stream that broke on llmclient.upstream
//     and went on on llmclient.target), llmclient.client.fallbacks, llmclient.breaker.transitions (llmclient.upstream,
//     llmclient.breaker.state: the new state), llmclient.key.cooldowns,
//     llmclient.key.evictions and llmclient.alerts (llmclient.upstream, llmclient.key,
//     error.type): counters.
//   - llmclient.client.cost (USD, counter): what calls cost, by the call attributes of
//     gen_ai.client.operation.duration, for Clients with pricing (llmclient.WithPricing);
//     a partly known cost adds its known part. llmclient.budget.events ({event}, by
//     llmclient.budget and llmclient.budget.hard): soft thresholds reached and hard caps
//     that refused an attempt.
//   - llmclient.cache.lookups ({lookup}, by llmclient.cache.result hit, miss or
//     guard_rejected, and llmclient.cache.layer exact or semantic) and
//     llmclient.cache.stores ({entry}, by llmclient.cache.layer): counters of the cache
//     events a cache reports to Observe (package cache: WithObserver(ClientEvents(tel.Observe))).
//     The hit rate is the rate of result hit over that of all lookups, per layer.
//
// Client.Embed's calls are recorded like the others with gen_ai.operation.name
// "embeddings": each of its batches is a call (metrics only: Embed is not wrapped by
// Middleware, so it has no span).
//
// Gauges, read from Client.Snapshot at each collection once Watch is called:
//
//   - llmclient.breaker.state: 1 for the upstream's breaker state, 0 for the others
//     (llmclient.breaker.state closed, open, half-open).
//   - llmclient.upstream.in_flight ({attempt}).
//   - llmclient.key.state: 1 for the key's state, 0 for the others (llmclient.key.state
//     ready, cooling, evicted).
//   - llmclient.limiter.remaining, llmclient.limiter.capacity, llmclient.limiter.limit:
//     each key's limiter by llmclient.limit.dimension (requests, tokens, concurrency):
//     what its bucket holds, the bucket's size, the configured RPM, TPM or concurrency.
//   - llmclient.upstream.ratelimit.remaining and llmclient.upstream.ratelimit.limit: the
//     quota the upstream last reported for each key, by llmclient.limit.dimension
//     (requests, tokens, input_tokens, output_tokens).
//   - llmclient.cache.bytes (By), llmclient.cache.entries ({entry}),
//     llmclient.cache.hit_rate (hits over lookups since the cache was created) and the
//     counter llmclient.cache.evictions ({entry}) of each cache registered with
//     llmclient.WithCacheStats, by llmclient.cache.name and llmclient.cache.layer.
//
// error.type is the llmclient class of the failure: rate_limited, quota_exhausted,
// overloaded, server_error, timeout, network, bad_request, context_length,
// content_filtered, auth, permission, not_found, empty_output, canceled,
// stream_interrupted, unavailable, budget_exceeded (a budget's cap refused the call,
// llmclient.WithBudget), unpriced (a budget could not price the call's model), unknown;
// and "_OTHER" on the span of a call that panicked.
//
// The conventions are those of the OpenTelemetry GenAI semantic conventions
// (docs/gen-ai/gen-ai-spans.md and gen-ai-metrics.md, status Development), with
// gen_ai.provider.name in place of the older gen_ai.system.
package otel
