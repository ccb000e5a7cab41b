// Package llmclient makes calls to large language model APIs survive production: 429s,
// exhausted quotas, 5xx bursts, overloaded upstreams, stalled streams and retry storms.
//
// One Client sends chat requests to upstreams (a provider adapter plus optional API keys,
// model mapping and limits) and protects every call with layers in a fixed order, outer to
// inner:
//
//	Complete / Stream / Transport
//	  └─ Middleware (yours, WithMiddleware; package cache is one)
//	      └─ Route       model group; ordered, weighted, least-in-flight or latency (WithRouting); health-aware
//	          └─ Run         retry (Retry-After first, else jittered backoff), failover, hedging (WithHedging),
//	              │          context / content fallbacks, final fallback; caps, per-upstream retry budget, time budget
//	              └─ Breaker    per upstream: error ratio, failure run, slow-call ratio; open → next upstream, no call
//	                │ └─ Cost       with pricing (WithPricing, WithBudget, …): context-window pre-check, cost-aware failover, budgets
//	                  └─ Keys        least-in-flight key that is not cooling down or evicted
//	                      └─ Limiter      RPM, TPM and concurrency per key, before the upstream says 429
//	                          └─ AttemptTimeout (one-shot) | StreamGuard (first-token, idle, total)
//	                              └─ Classify   every failure becomes an *Error with a Class
//	                                  └─ adapter (provider/openai, provider/anthropic, provider/gemini, provider/fake)
//
// Errors are classified once, just above the adapter; the layers above act on the Class
// through a decision table (DefaultDecision, WithDecision) and never parse HTTP again.
// Retry sits outside the breaker and stops at an open breaker, leaving the next step to
// failover; no layer retries on its own, so attempts never multiply.
//
// Deadlines: every wait (Retry-After, backoff, a cooling key, the limiter's queue) ends
// before the context's deadline or is not started; with another upstream to go to, an
// attempt gets at most half of the time left, and a wait longer than WithWaitThreshold
// moves the call instead. Without a deadline, the attempt caps, WithMaxRetryAfter, the
// stream guard's timeouts and the adapters' HTTP timeouts bound a call. Per-call
// overrides travel in the context (WithCallOptions). A Client is safe for concurrent use.
//
// Every Response and every *Error carries the attempt trace: which upstream and key served
// each attempt, its class, status, latency and waits. An observer (WithObserver; package
// slogobserver logs with log/slog, the otel module emits OpenTelemetry traces and metrics)
// sees each attempt, failover, breaker change, key cooldown and alert as it happens, and
// each call's end; Client.Snapshot tells the state of every breaker, key and limiter.
// API keys never appear in errors, events or logs.
//
// The same engine also serves as an http.RoundTripper (Client.Transport), so code built on
// openai-go, anthropic-sdk-go or go-openai gets these layers by handing its SDK an
// http.Client; adapters that implement Dialect teach it their wire format.
//
// Streams commit at their first content token. Before it, every failure — an error event
// after HTTP 200 included — is retried or failed over invisibly; after it, the stream ends
// with a failure.StreamInterrupted error holding the partial output, never with a silent EOF.
package llmclient
