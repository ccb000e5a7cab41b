package llmclient

import (
	"path"
	"reflect"
	"time"

	"github.com/llmclient/llmclient/health"
	"github.com/llmclient/llmclient/ratelimit"
)

// Snapshot returns the state of every upstream now, in registration order: its breaker,
// its keys (ready, cooling or evicted, and until when), the levels of each key's limiter
// against its limits and the quota the upstream last reported, the attempts in flight
// (the upstream's count, like Client.InFlight, includes those still running on keys
// Update removed, which Keys no longer lists), and the error rate and latency percentiles
// of its calls in about the last minute; and the statistics of the caches registered with
// WithCacheStats. The result is JSON-friendly (see package health), for health endpoints
// and metrics.
//
// It reads the Client's state while calls go on, without stopping them: each part is
// consistent on its own (a key's state, a limiter's levels, the window's counts), but
// calls may move between the reading of one part and the next. It is safe for concurrent
// use. Like Breaker.State, it turns an open breaker whose open time has passed half-open,
// and may deliver the breaker's state-change events on the caller's goroutine.
func (c *Client) Snapshot() health.Snapshot {
	now := time.Now()
	s := health.Snapshot{Time: now, Upstreams: make([]health.Upstream, 0, len(c.upstreams))}
	for _, up := range c.upstreams {
		s.Upstreams = append(s.Upstreams, up.snapshot(now))
	}
	s.Caches = c.cacheSnapshot()
	return s
}

// snapshot is the upstream's part of Client.Snapshot.
func (up *upstream) snapshot(now time.Time) health.Upstream {
	pool := up.pool()
	rec := up.recent.summary(now)
	h := health.Upstream{
		Name:        up.Name,
		Adapter:     adapterName(up.Provider),
		Breaker:     up.breaker.Snapshot(),
		Drained:     up.drained.Load(),
		Window:      recentSlots * recentWidth,
		Attempts:    int(rec.attempts),
		Errors:      int(rec.errors),
		RateLimited: int(rec.rateLimited),
		LatencyP50:  rec.p50,
		LatencyP90:  rec.p90,
		LatencyP99:  rec.p99,
		Keys:        make([]health.Key, 0, len(pool.keys)),
	}
	av := up.availability(now)
	h.Serving, h.Refusal, h.RefusedUntil = av.serves(), av.why.String(), av.until
	if rec.attempts > 0 {
		h.ErrorRate = float64(rec.errors) / float64(rec.attempts)
	}
	for _, k := range pool.keys {
		hk := k.snapshot(now, pool.limits)
		h.InFlight += hk.InFlight
		h.Keys = append(h.Keys, hk)
	}
	for _, k := range pool.retired { // keys Update removed, their calls still going on
		h.InFlight += max(int(k.inFlight.Load()), 0)
	}
	return h
}

// snapshot is the key's part of Client.Snapshot; limits are its upstream's.
func (k *poolKey) snapshot(now time.Time, limits Limits) health.Key {
	hk := health.Key{Label: k.label, State: health.KeyReady, InFlight: max(int(k.inFlight.Load()), 0)}
	if hk.Label == "" {
		hk.Label = defaultKeyLabel
	}
	if until, evicted := k.outUntil(now); !until.IsZero() {
		hk.State, hk.Until = health.KeyCooling, until
		if evicted {
			hk.State = health.KeyEvicted
		}
	}
	if l := k.limiter(); l != nil {
		if lv, ok := l.state.(interface{ Levels() (float64, float64) }); ok {
			reqs, toks := lv.Levels()
			reqCap, tokCap := l.sync.capacities()
			if limits.RPM > 0 {
				hk.Requests = &health.Level{Limit: int64(limits.RPM), Capacity: reqCap, Remaining: reqs}
			}
			if limits.TPM > 0 {
				hk.Tokens = &health.Level{Limit: int64(limits.TPM), Capacity: tokCap, Remaining: toks}
			}
		}
		if n := limits.MaxConcurrent; n > 0 {
			hk.Concurrency = &health.Level{Limit: int64(n), Capacity: float64(n), Remaining: float64(n - l.InFlight())}
		}
		if l.limited.Load() {
			hk.RateFactor = 1 / factor(&l.sync.scale)
		}
	}
	if rl, at, ok := k.lastReport(); ok {
		hk.Reported = &health.Reported{At: at, Requests: reportedLevel(rl.Requests),
			Tokens: reportedLevel(rl.Tokens), InputTokens: reportedLevel(rl.InputTokens),
			OutputTokens: reportedLevel(rl.OutputTokens)}
	}
	return hk
}

// reportedLevel is one dimension of an upstream's report, nil when it sent none.
func reportedLevel(w ratelimit.Window) *health.Level {
	if !w.Known {
		return nil
	}
	return &health.Level{Limit: w.Limit, Remaining: float64(w.Remaining), Reset: w.Reset}
}

// adapterName is the Go package name of a provider adapter: "openai", "anthropic", ….
func adapterName(p Provider) string {
	t := reflect.TypeOf(p)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.PkgPath() == "" {
		return ""
	}
	return path.Base(t.PkgPath())
}
