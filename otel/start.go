package otel

import (
	"hash/maphash"
	"math"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmclient/llmclient"
)

// startKey identifies what a call span starts with: its operation and the request's
// model and parameters (temperature and top_p as their bits, when set).
type startKey struct {
	op, model             string
	maxTokens             int
	temperature, topP     uint64
	hasTemperature, hasTP bool
}

// hash picks k's shard of the cache.
func (k *startKey) hash() uint64 {
	return maphash.String(hashSeed, k.model) ^ uint64(len(k.op)) ^ uint64(k.maxTokens)<<8 ^ k.temperature ^ k.topP<<1
}

// startKeyOf is the startKey of a typed request.
func startKeyOf(op string, req *llmclient.Request) startKey {
	k := startKey{op: op}
	if req == nil {
		return k
	}
	k.model = clampValue(req.Model)
	if req.MaxTokens > 0 {
		k.maxTokens = req.MaxTokens
	}
	if req.Temperature != nil {
		k.hasTemperature, k.temperature = true, math.Float64bits(*req.Temperature)
	}
	if req.TopP != nil {
		k.hasTP, k.topP = true, math.Float64bits(*req.TopP)
	}
	return k
}

// startEntry is a call span's name ("chat gpt-4o"), its start options (its kind and the
// attributes known at its start that the GenAI conventions name as sampling-relevant:
// gen_ai.operation.name and gen_ai.request.model, which samplers see) and params, the
// request's parameters (gen_ai.request.max_tokens, temperature, top_p), which only a
// recorded span is given, with its end attributes (one call to the span, and no growth
// of its attribute slice for them). Made once per startKey.
type startEntry struct {
	key    startKey
	name   string
	opts   []trace.SpanStartOption
	params []attribute.KeyValue
}

func newStartEntry(k startKey) *startEntry {
	attrs := make([]attribute.KeyValue, 0, 2)
	attrs = append(attrs, str(keyOperation, k.op))
	name := k.op
	if k.model != "" {
		attrs = append(attrs, str(keyRequestModel, k.model))
		name = k.op + " " + k.model
	}
	var params []attribute.KeyValue
	if k.maxTokens > 0 {
		params = append(params, keyMaxTokens.Int(k.maxTokens))
	}
	if k.hasTemperature {
		params = append(params, keyTemperature.Float64(math.Float64frombits(k.temperature)))
	}
	if k.hasTP {
		params = append(params, keyTopP.Float64(math.Float64frombits(k.topP)))
	}
	return &startEntry{key: k, name: name, opts: []trace.SpanStartOption{kindClient, trace.WithAttributes(attrs...)}, params: params}
}

// startCache holds the startEntry of each startKey seen, up to maxCachedStarts (beyond,
// entries are built for each call), the last one found checked first. The options it
// hands out are shared: the tracer copies the attributes of its start options.
type startCache struct {
	m    cowMap[startKey, *startEntry]
	last atomic.Pointer[startEntry]
}

// lastFor returns the entry last found, if it is that of a typed request's call span
// (operation op), without making the request's key: the hot path of every call.
func (c *startCache) lastFor(op string, req *llmclient.Request) *startEntry {
	e := c.last.Load()
	if e == nil || req == nil || e.key.op != op || e.key.model != req.Model || e.key.maxTokens != max(req.MaxTokens, 0) {
		return nil
	}
	if t := req.Temperature; (t != nil) != e.key.hasTemperature || t != nil && math.Float64bits(*t) != e.key.temperature {
		return nil
	}
	if p := req.TopP; (p != nil) != e.key.hasTP || p != nil && math.Float64bits(*p) != e.key.topP {
		return nil
	}
	return e
}

func (c *startCache) get(k *startKey) *startEntry {
	if e := c.last.Load(); e != nil && e.key == *k {
		return e
	}
	h := k.hash()
	e, ok := c.m.load(h, *k)
	if !ok {
		e = newStartEntry(*k)
		c.m.store(h, *k, e, maxCachedStarts)
	}
	c.last.Store(e)
	return e
}
