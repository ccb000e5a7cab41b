package otel

import (
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/llmclient/llmclient"
)

// The attributes, from the OpenTelemetry GenAI and general semantic conventions, and
// llmclient's own.
const (
	keyOperation     = attribute.Key("gen_ai.operation.name")
	keyProvider      = attribute.Key("gen_ai.provider.name")
	keyRequestModel  = attribute.Key("gen_ai.request.model")
	keyResponseModel = attribute.Key("gen_ai.response.model")
	keyFinishReasons = attribute.Key("gen_ai.response.finish_reasons")
	keyInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	keyOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	keyTokenType     = attribute.Key("gen_ai.token.type")
	keyMaxTokens     = attribute.Key("gen_ai.request.max_tokens")
	keyTemperature   = attribute.Key("gen_ai.request.temperature")
	keyTopP          = attribute.Key("gen_ai.request.top_p")
	keyErrorType     = attribute.Key("error.type")
	keyStatus        = attribute.Key("http.response.status_code")

	keyUpstream     = attribute.Key("llmclient.upstream")
	keyBudget       = attribute.Key("llmclient.budget")
	keyBudgetHard   = attribute.Key("llmclient.budget.hard")
	keyTarget       = attribute.Key("llmclient.target")
	keyKey          = attribute.Key("llmclient.key")
	keyAttempt      = attribute.Key("llmclient.attempt")
	keyAttempts     = attribute.Key("llmclient.attempts")
	keyCallID       = attribute.Key("llmclient.call_id")
	keyPartition    = attribute.Key("llmclient.partition")
	keyWaited       = attribute.Key("llmclient.waited")
	keyLimiterWait  = attribute.Key("llmclient.limiter_wait")
	keyLocal        = attribute.Key("llmclient.local")
	keyRetry        = attribute.Key("llmclient.retry")
	keyHedge        = attribute.Key("llmclient.hedge")
	keyFailover     = attribute.Key("llmclient.failover")
	keyFallback     = attribute.Key("llmclient.fallback")
	keyEstimated    = attribute.Key("llmclient.estimated_tokens")
	keyTTFC         = attribute.Key("llmclient.time_to_first_chunk")
	keyChunks       = attribute.Key("llmclient.chunks")
	keyReason       = attribute.Key("llmclient.reason")
	keyUntil        = attribute.Key("llmclient.until")
	keyBreakerState = attribute.Key("llmclient.breaker.state")
	keyKeyState     = attribute.Key("llmclient.key.state")
	keyDimension    = attribute.Key("llmclient.limit.dimension")
	keyCacheResult  = attribute.Key("llmclient.cache.result")
	keyCacheLayer   = attribute.Key("llmclient.cache.layer")
	keyCacheName    = attribute.Key("llmclient.cache.name")
	opChat          = "chat"
	opEmbeddings    = "embeddings"
	tokenInput      = "input"
	tokenOutput     = "output"
	providerUnknown = "_OTHER"
	maxCachedSets   = 4096
	maxCachedStarts = 1024
)

// errorType is the error.type of a class: its name ("rate_limited", "timeout", ...),
// or "" for success.
func errorType(c llmclient.Class) string {
	if c == llmclient.ClassNone {
		return ""
	}
	return c.String()
}

// providerName is the gen_ai.provider.name of an upstream.
func (t *Telemetry) providerName(upstream string) string {
	if t.provider != nil {
		if n := t.provider(upstream); n != "" {
			return n
		}
	}
	if m := t.adapters.Load(); m != nil {
		if n, ok := (*m)[upstream]; ok {
			return n
		}
	}
	return providerUnknown
}

// adapterProvider maps an adapter package name to its gen_ai.provider.name.
func adapterProvider(adapter string) string {
	switch adapter {
	case "":
		return providerUnknown
	case "gemini":
		return "gcp.gemini"
	}
	return adapter // openai, anthropic, and the user's own
}

// setKind says which instrument family a cached attribute set serves.
type setKind uint8

const (
	setCall setKind = iota + 1
	setAttempt
	setRefusal
	setWait
	setDecision
	setCacheOp
	setAttemptSpan // a refused attempt's span: name and attributes only
	setKinds
)

// setKey identifies an attribute set; fields a kind does not use stay zero.
type setKey struct {
	kind                                     setKind
	op, upstream, model, respModel, key, aux string
	class                                    llmclient.Class
	status                                   int
}

// setEntry holds the measurement options of one attribute set, ready to pass as a
// variadic argument without allocating: rec and add for the set itself, in and out for
// the token histogram (with gen_ai.token.type). For the sets of attempts and calls it
// also holds what their spans take from them, made once: name, an attempt span's name,
// and span, the first attributes a span of the set gets.
type setEntry struct {
	key     setKey
	rec     []metric.RecordOption
	add     []metric.AddOption
	in, out []metric.RecordOption
	name    string
	span    []attribute.KeyValue
	// attempts counts the upstream calls of an attempt set (llmclient.client.attempts).
	attempts *countCell
	set      attribute.Set
}

func newSetEntry(kvs []attribute.KeyValue, tokens bool) *setEntry {
	kvs = kvs[:len(kvs):len(kvs)] // NewSet sorts in place: each append below copies
	set := attribute.NewSet(kvs...)
	o := metric.WithAttributeSet(set)
	e := &setEntry{rec: []metric.RecordOption{o}, add: []metric.AddOption{o}, set: set}
	if tokens {
		e.in = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(append(kvs, keyTokenType.String(tokenInput))...))}
		e.out = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(append(kvs, keyTokenType.String(tokenOutput))...))}
	}
	return e
}

// withAttemptSpan adds to e the name of an attempt span on upstream and its first
// attributes: operation, provider, upstream and model.
func (t *Telemetry) withAttemptSpan(e *setEntry, op, upstream, model string) *setEntry {
	e.name = "attempt " + upstream
	if upstream == "" {
		e.name = "attempt"
	}
	e.span = []attribute.KeyValue{keyOperation.String(op), keyProvider.String(t.providerName(upstream)), keyUpstream.String(upstream)}
	if model != "" {
		e.span = append(e.span, keyRequestModel.String(model))
	}
	return e
}

// setCache is a copy-on-write map of attribute sets: lookups take no lock and allocate
// nothing; a miss builds the set and, below maxCachedSets entries, adds it. The entry
// last found for each kind is checked first, which spares hashing the key when calls look
// alike.
type setCache struct {
	m    cowMap[setKey, *setEntry]
	last [setKinds]atomic.Pointer[setEntry]
}

// get returns the set of k, made by build on a miss.
func (c *setCache) get(k setKey, build func() *setEntry) *setEntry {
	if e := c.lookup(&k); e != nil {
		return e
	}
	return c.add(&k, build())
}

// lookup returns the set of *k, or nil. The hot paths call it and add rather than get,
// which spares them a closure and a copy of the key.
func (c *setCache) lookup(k *setKey) *setEntry {
	last := &c.last[k.kind]
	if e := last.Load(); e != nil && e.key == *k {
		return e
	}
	if e, ok := c.m.load(*k); ok {
		last.Store(e)
		return e
	}
	return nil
}

// lastAttempt returns the set last found for the upstream calls of e (operation op), if
// it is theirs, without making e's key: the hot path of every attempt. A set of kind
// setAttempt uses no other fields of its key.
func (c *setCache) lastAttempt(op string, e *llmclient.Event) *setEntry {
	if s := c.last[setAttempt].Load(); s != nil && s.key.status == e.Status && s.key.class == e.Class &&
		s.key.upstream == e.Upstream && s.key.model == e.Model && s.key.op == op {
		return s
	}
	return nil
}

// lastCall is lastAttempt for the end of a call: a set of kind setCall uses no other
// fields of its key.
func (c *setCache) lastCall(op string, e *llmclient.Event) *setEntry {
	if s := c.last[setCall].Load(); s != nil && s.key.class == e.Class && s.key.upstream == e.Upstream &&
		s.key.model == e.Model && s.key.respModel == e.ResponseModel && s.key.op == op {
		return s
	}
	return nil
}

// add keeps e as the set of *k (unless the cache is full) and returns it.
func (c *setCache) add(k *setKey, e *setEntry) *setEntry {
	e.key = *k
	c.m.store(*k, e, maxCachedSets)
	return e
}

// reset forgets every set (after Watch learned provider names).
func (c *setCache) reset() {
	c.m.reset()
	for i := range c.last {
		c.last[i].Store(nil)
	}
}

// cowMap is a copy-on-write map: a load takes no lock and allocates nothing; a store
// copies the map under a lock, unless it already holds max entries (then the value is
// not kept). It is safe for concurrent use.
type cowMap[K comparable, V any] struct {
	mu sync.Mutex
	m  atomic.Pointer[map[K]V]
}

func (c *cowMap[K, V]) load(k K) (V, bool) {
	if m := c.m.Load(); m != nil {
		v, ok := (*m)[k]
		return v, ok
	}
	var zero V
	return zero, false
}

func (c *cowMap[K, V]) store(k K, v V, max int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	n := 0
	if old != nil {
		n = len(*old)
	}
	if n >= max {
		return
	}
	m := make(map[K]V, n+1)
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[k] = v
	c.m.Store(&m)
}

func (c *cowMap[K, V]) reset() {
	c.mu.Lock()
	c.m.Store(nil)
	c.mu.Unlock()
}

// The gen_ai.response.finish_reasons of the finish reasons llmclient names, made once:
// an attribute value is immutable, and building a string slice one allocates twice.
var (
	finishStop          = keyFinishReasons.StringSlice([]string{string(llmclient.FinishStop)})
	finishLength        = keyFinishReasons.StringSlice([]string{string(llmclient.FinishLength)})
	finishToolCalls     = keyFinishReasons.StringSlice([]string{string(llmclient.FinishToolCalls)})
	finishContentFilter = keyFinishReasons.StringSlice([]string{string(llmclient.FinishContentFilter)})
	finishRefusal       = keyFinishReasons.StringSlice([]string{string(llmclient.FinishRefusal)})
	finishOther         = keyFinishReasons.StringSlice([]string{string(llmclient.FinishOther)})
)

// finishReasons is the gen_ai.response.finish_reasons attribute of a call that ended
// for reason r.
func finishReasons(r llmclient.FinishReason) attribute.KeyValue {
	switch r {
	case llmclient.FinishStop:
		return finishStop
	case llmclient.FinishLength:
		return finishLength
	case llmclient.FinishToolCalls:
		return finishToolCalls
	case llmclient.FinishContentFilter:
		return finishContentFilter
	case llmclient.FinishRefusal:
		return finishRefusal
	case llmclient.FinishOther:
		return finishOther
	}
	return keyFinishReasons.StringSlice([]string{string(r)})
}
