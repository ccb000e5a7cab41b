// Package health holds the types of llmclient.Client.Snapshot: the state of every
// upstream, breaker, key and limiter of a Client at one moment, for health endpoints,
// dashboards and metrics. The package has no behaviour of its own; a Client fills the
// types in.
//
// Every type renders as JSON with snake_case names; durations render as Go duration
// strings ("1.5s", "250ms"), times as RFC 3339, breaker and key states as words:
//
//	http.HandleFunc("/healthz/llm", func(w http.ResponseWriter, r *http.Request) {
//		w.Header().Set("Content-Type", "application/json")
//		json.NewEncoder(w).Encode(client.Snapshot())
//	})
package health

import (
	"encoding/json"
	"time"

	"github.com/llmclient/llmclient/breaker"
)

// Snapshot is the state of a Client's upstreams at Time, in the order they were
// registered. Each upstream's state is read without stopping traffic: the parts of one
// upstream are each consistent, but calls may move between reading one part and the next.
type Snapshot struct {
	Time      time.Time  `json:"time"`
	Upstreams []Upstream `json:"upstreams"`
	// Caches holds the statistics of the caches registered with the Client
	// (llmclient.WithCacheStats), in registration order; nil without any.
	Caches []Cache `json:"caches,omitempty"`
}

// Cache is a response cache's statistics since it was created (package cache:
// Cache.Health, Semantic.Health), as a Client's Snapshot reports them. Counters only grow;
// Entries, Bytes and InFlight are levels now.
type Cache struct {
	// Name is the name the cache was registered under.
	Name string `json:"name"`
	// Semantic is true for a semantic cache.
	Semantic bool `json:"semantic"`
	// Hits, Misses and GuardRejections count lookups: an answer served, none found, and
	// (semantic) a similar question that a guard rule rejected. Bypasses counts calls
	// that skipped the lookup (a Control, or no question to compare).
	Hits            uint64 `json:"hits"`
	Misses          uint64 `json:"misses"`
	GuardRejections uint64 `json:"guard_rejections"`
	Bypasses        uint64 `json:"bypasses"`
	// HitRate is Hits over Hits + Misses + GuardRejections, 0 before any lookup.
	HitRate float64 `json:"hit_rate"`
	// Stored and NotStored count answers stored, and answers that were not storable.
	Stored    uint64 `json:"stored"`
	NotStored uint64 `json:"not_stored"`
	// Shared counts calls that joined an identical call in flight, Replays calls answered
	// with the first answer under their idempotency key.
	Shared  uint64 `json:"shared"`
	Replays uint64 `json:"replays"`
	// Errors counts failed store calls (exact cache) or embedding calls (semantic).
	Errors uint64 `json:"errors"`
	// Entries and Bytes are what the cache holds now, when its store reports it.
	Entries int64 `json:"entries"`
	Bytes   int64 `json:"bytes"`
	// Evictions counts entries dropped to make room, Expired those dropped once their TTL
	// had passed, Rejected entries the store declined (too large).
	Evictions uint64 `json:"evictions"`
	Expired   uint64 `json:"expired"`
	Rejected  uint64 `json:"rejected"`
	// InFlight is the number of shared or idempotent calls in flight now.
	InFlight int `json:"in_flight"`
}

// Upstream is one upstream's state.
type Upstream struct {
	// Name is the upstream's name (llmclient.Upstream.Name).
	Name string `json:"name"`
	// Adapter is the Go package name of its provider adapter: "openai" (also for every
	// OpenAI-compatible vendor), "anthropic", "gemini", "fake", or the user's own.
	Adapter string `json:"adapter"`
	// Drained is true while the operator drains the upstream (llmclient.Client.Drain).
	Drained bool `json:"drained,omitempty"`
	// Serving is true when the upstream can serve a call now: the same answer routing,
	// failover and hedging use. Otherwise Refusal says why — "drained", "forced_open"
	// (an operator holds the breaker open), "breaker_open" (open, or half-open with every
	// probe out), "shared_trip" (another replica tripped the shared breaker), "no_key"
	// (every key cooling down, evicted or paused after a rate limit), "slow" (its last
	// attempts were all cut by the Client's share of the time left: calls start elsewhere
	// for a while) — and RefusedUntil when it ends at the earliest (zero when not known: a drain, a forced state, probes
	// out, keys evicted).
	Serving      bool      `json:"serving"`
	Refusal      string    `json:"refusal,omitempty"`
	RefusedUntil time.Time `json:"refused_until,omitzero"`
	// Breaker is the circuit breaker's state and counters. In JSON its State is a word
	// ("closed", "open", "half-open") and OpenRemaining a duration string.
	Breaker breaker.Snapshot `json:"breaker"`
	// InFlight counts the attempts in flight on the upstream, across its keys: one-shot
	// calls not yet returned and streams not yet ended or closed.
	InFlight int `json:"in_flight"`
	// Window is the span of recent attempts that Attempts, Errors, RateLimited, ErrorRate
	// and the latency percentiles cover: about the last minute.
	Window time.Duration `json:"window"`
	// Attempts counts the upstream calls in Window (local refusals are not upstream
	// calls); Errors those that failed, the caller's cancellations excepted; RateLimited
	// those that failed with a rate limit (a part of Errors).
	Attempts    int `json:"attempts"`
	Errors      int `json:"errors"`
	RateLimited int `json:"rate_limited"`
	// ErrorRate is Errors/Attempts, 0 without attempts.
	ErrorRate float64 `json:"error_rate"`
	// LatencyP50, LatencyP90 and LatencyP99 are percentiles of the latency of the
	// attempts in Window: a one-shot attempt's whole duration, a stream's time to its
	// first token (or to its failure before one). They are read from a histogram whose
	// buckets are at most a quarter wide, so each is within 13% of the exact value; 0
	// without attempts.
	LatencyP50 time.Duration `json:"latency_p50"`
	LatencyP90 time.Duration `json:"latency_p90"`
	LatencyP99 time.Duration `json:"latency_p99"`
	// Keys holds the state of each key of the upstream's pool, in pool order; an upstream
	// without a pool has one key, labelled "default".
	Keys []Key `json:"keys"`
}

// KeyState says whether a key can be picked.
type KeyState string

// The key states.
const (
	// KeyReady: the key can be picked.
	KeyReady KeyState = "ready"
	// KeyCooling: the key is paused for every caller after a rate limit, until Until.
	KeyCooling KeyState = "cooling"
	// KeyEvicted: the key is out of the pool after an auth failure or an exhausted
	// quota, until Until.
	KeyEvicted KeyState = "evicted"
)

// Key is one API key's state. It never holds the key itself.
type Key struct {
	// Label names the key: "key#1" for the first key of the pool, "default" for the
	// adapter's own key.
	Label string   `json:"label"`
	State KeyState `json:"state"`
	// Until ends a cooldown or eviction; zero when the key is ready.
	Until time.Time `json:"until,omitzero"`
	// InFlight counts the attempts in flight on the key.
	InFlight int `json:"in_flight"`
	// Requests, Tokens and Concurrency are the key's limiter, for each dimension its
	// Limits set (nil when unlimited). Requests and Tokens are nil too when the limit
	// store cannot tell its levels without a round trip (a shared store such as Redis).
	Requests    *Level `json:"requests,omitempty"`
	Tokens      *Level `json:"tokens,omitempty"`
	Concurrency *Level `json:"concurrency,omitempty"`
	// RateFactor is the share of its token rate the limiter admits in its own estimate's
	// tokens: one over the charge multiplier the upstream's headers calibrated (what
	// Attempt.ChargedTokens is of EstimatedTokens), in [1/32, 4]. Below 1 when the
	// upstream counts more than the estimate or, without a shared store, other processes
	// use the key; 1 until the headers calibrate the charge. 0 when the key limits nothing.
	RateFactor float64 `json:"rate_factor,omitzero"`
	// Reported is the key's quota as the upstream last reported it in response headers
	// (x-ratelimit-*, anthropic-ratelimit-*); nil before any report.
	Reported *Reported `json:"reported,omitempty"`
}

// Level is one limited dimension against its limit.
//
// For the Client's own limiter, Limit is the configured quota (RPM, TPM, or the maximum
// in flight), Capacity the bucket's size (its burst; for concurrency, Limit) and
// Remaining what the bucket holds now: Capacity when full, negative while a request
// larger than the bucket is paid off; for concurrency, the free slots.
//
// For the upstream's report, Limit and Remaining are the reported numbers, Reset the time
// until the upstream replenishes the window, as of Reported.At, and Capacity is 0.
type Level struct {
	Limit     int64         `json:"limit"`
	Remaining float64       `json:"remaining"`
	Capacity  float64       `json:"capacity,omitzero"`
	Reset     time.Duration `json:"reset,omitzero"`
}

// Reported is the quota an upstream last reported for a key, at At. A dimension the
// upstream did not report is nil.
type Reported struct {
	At           time.Time `json:"at"`
	Requests     *Level    `json:"requests,omitempty"`
	Tokens       *Level    `json:"tokens,omitempty"`
	InputTokens  *Level    `json:"input_tokens,omitempty"`
	OutputTokens *Level    `json:"output_tokens,omitempty"`
}

// MarshalJSON renders u with its durations as strings and its breaker state as a word.
func (u Upstream) MarshalJSON() ([]byte, error) {
	type plain Upstream
	b := u.Breaker
	return json.Marshal(struct {
		plain
		Breaker    breakerJSON `json:"breaker"`
		Window     string      `json:"window"`
		LatencyP50 string      `json:"latency_p50"`
		LatencyP90 string      `json:"latency_p90"`
		LatencyP99 string      `json:"latency_p99"`
	}{
		plain: plain(u),
		Breaker: breakerJSON{State: b.State.String(), Successes: b.Successes, Failures: b.Failures, Slow: b.Slow,
			ConsecutiveFailures: b.ConsecutiveFailures, Trips: b.Trips,
			OpenRemaining: b.OpenRemaining.String(), ProbesInFlight: b.ProbesInFlight, Forced: b.Forced},
		Window:     u.Window.String(),
		LatencyP50: u.LatencyP50.String(),
		LatencyP90: u.LatencyP90.String(),
		LatencyP99: u.LatencyP99.String(),
	})
}

// breakerJSON is breaker.Snapshot as JSON.
type breakerJSON struct {
	State               string `json:"state"`
	Successes           int    `json:"successes"`
	Failures            int    `json:"failures"`
	Slow                int    `json:"slow"`
	Forced              bool   `json:"forced,omitempty"`
	ConsecutiveFailures int    `json:"consecutive_failures"`
	Trips               int    `json:"trips"`
	OpenRemaining       string `json:"open_remaining"`
	ProbesInFlight      int    `json:"probes_in_flight"`
}

// MarshalJSON renders l with Reset as a duration string.
func (l Level) MarshalJSON() ([]byte, error) {
	type plain Level
	out := struct {
		plain
		Reset string `json:"reset,omitempty"`
	}{plain: plain(l)}
	if l.Reset != 0 {
		out.Reset = l.Reset.String()
	}
	return json.Marshal(out)
}
