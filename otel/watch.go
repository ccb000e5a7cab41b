package otel

import (
	"context"
	"math"

	"go.opentelemetry.io/otel/metric"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/health"
)

var (
	breakerStates = [...]breaker.State{breaker.Closed, breaker.Open, breaker.HalfOpen}
	keyStates     = [...]health.KeyState{health.KeyReady, health.KeyCooling, health.KeyEvicted}
)

// Watch registers the gauges of c's state (breakers, in-flight attempts, keys, limiter
// levels and the quotas upstreams reported, and the caches registered with
// llmclient.WithCacheStats), read from one c.Snapshot at each collection,
// and learns the gen_ai.provider.name of c's upstreams from their adapters (see
// WithProviderName). Unregister the result to stop observing c. Watching two Clients with
// upstreams of the same name reports both under that name.
func (t *Telemetry) Watch(c *llmclient.Client) (metric.Registration, error) {
	s := c.Snapshot()
	next := map[string]string{}
	if old := t.adapters.Load(); old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	for _, u := range s.Upstreams {
		next[u.Name] = adapterProvider(u.Adapter)
	}
	t.adapters.Store(&next)
	t.sets.reset()
	return t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		t.observeSnapshot(o, c.Snapshot())
		return nil
	}, t.m.observables...)
}

func (t *Telemetry) observeSnapshot(o metric.Observer, s health.Snapshot) {
	m := &t.m
	for _, cs := range s.Caches {
		layer := "exact"
		if cs.Semantic {
			layer = "semantic"
		}
		attrs := metric.WithAttributes(str(keyCacheName, cs.Name), str(keyCacheLayer, layer))
		o.ObserveInt64(m.cacheBytes, cs.Bytes, attrs)
		o.ObserveInt64(m.cacheEntries, cs.Entries, attrs)
		o.ObserveFloat64(m.cacheHitRate, cs.HitRate, attrs)
		o.ObserveInt64(m.cacheEvictions, int64(min(cs.Evictions, uint64(math.MaxInt64))), attrs)
	}
	for _, u := range s.Upstreams {
		up := str(keyUpstream, u.Name)
		for _, st := range breakerStates {
			o.ObserveInt64(m.breakerState, b2i(u.Breaker.State == st),
				metric.WithAttributes(up, str(keyBreakerState, st.String())))
		}
		o.ObserveInt64(m.upstreamInFlight, int64(u.InFlight), metric.WithAttributes(up))
		for _, k := range u.Keys {
			key := str(keyKey, k.Label)
			for _, st := range keyStates {
				o.ObserveInt64(m.keyState, b2i(k.State == st), metric.WithAttributes(up, key, str(keyKeyState, string(st))))
			}
			for _, l := range [...]struct {
				dim string
				l   *health.Level
			}{{"requests", k.Requests}, {"tokens", k.Tokens}, {"concurrency", k.Concurrency}} {
				if l.l == nil {
					continue
				}
				attrs := metric.WithAttributes(up, key, str(keyDimension, l.dim))
				o.ObserveFloat64(m.limiterRemaining, l.l.Remaining, attrs)
				o.ObserveFloat64(m.limiterCapacity, l.l.Capacity, attrs)
				o.ObserveInt64(m.limiterLimit, l.l.Limit, attrs)
			}
			if r := k.Reported; r != nil {
				for _, l := range [...]struct {
					dim string
					l   *health.Level
				}{{"requests", r.Requests}, {"tokens", r.Tokens}, {"input_tokens", r.InputTokens}, {"output_tokens", r.OutputTokens}} {
					if l.l == nil {
						continue
					}
					attrs := metric.WithAttributes(up, key, str(keyDimension, l.dim))
					o.ObserveFloat64(m.reportedRemaining, l.l.Remaining, attrs)
					o.ObserveInt64(m.reportedLimit, l.l.Limit, attrs)
				}
			}
		}
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
