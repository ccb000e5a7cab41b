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

	keyUpstream       = attribute.Key("llmclient.upstream")
	keyBudget         = attribute.Key("llmclient.budget")
	keyBudgetHard     = attribute.Key("llmclient.budget.hard")
	keyTarget         = attribute.Key("llmclient.target")
	keyKey            = attribute.Key("llmclient.key")
	keyAttempt        = attribute.Key("llmclient.attempt")
	keyAttempts       = attribute.Key("llmclient.attempts")
	keyCallID         = attribute.Key("llmclient.call_id")
	keyPartition      = attribute.Key("llmclient.partition")
	keyWaited         = attribute.Key("llmclient.waited")
	keyLimiterWait    = attribute.Key("llmclient.limiter_wait")
	keyLocal          = attribute.Key("llmclient.local")
	keyRetry          = attribute.Key("llmclient.retry")
	keyHedge          = attribute.Key("llmclient.hedge")
	keyFailover       = attribute.Key("llmclient.failover")
	keyFallback       = attribute.Key("llmclient.fallback")
	keyEstimated      = attribute.Key("llmclient.estimated_tokens")
	keyTTFC           = attribute.Key("llmclient.time_to_first_chunk")
	keyChunks         = attribute.Key("llmclient.chunks")
	keyReason         = attribute.Key("llmclient.reason")
	keyUntil          = attribute.Key("llmclient.until")
	keyBreakerState   = attribute.Key("llmclient.breaker.state")
	keyKeyState       = attribute.Key("llmclient.key.state")
	keyDimension      = attribute.Key("llmclient.limit.dimension")
	keyCacheResult    = attribute.Key("llmclient.cache.result")
	keyCacheLayer     = attribute.Key("llmclient.cache.layer")
	keyCacheName      = attribute.Key("llmclient.cache.name")
	opChat            = "chat"
	opEmbeddings      = "embeddings"
	tokenInput        = "input"
	tokenOutput       = "output"
	providerUnknown   = "_OTHER"
	maxCachedSets     = 4096
	maxCachedSpanName = 1024
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
// the token histogram (with gen_ai.token.type).
type setEntry struct {
	key     setKey
	rec     []metric.RecordOption
	add     []metric.AddOption
	in, out []metric.RecordOption
}

func newSetEntry(kvs []attribute.KeyValue, tokens bool) *setEntry {
	kvs = kvs[:len(kvs):len(kvs)] // NewSet sorts in place: each append below copies
	o := metric.WithAttributeSet(attribute.NewSet(kvs...))
	e := &setEntry{rec: []metric.RecordOption{o}, add: []metric.AddOption{o}}
	if tokens {
		e.in = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(append(kvs, keyTokenType.String(tokenInput))...))}
		e.out = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(append(kvs, keyTokenType.String(tokenOutput))...))}
	}
	return e
}

// setCache is a copy-on-write map of attribute sets: lookups take no lock and allocate
// nothing; a miss builds the set and, below maxCachedSets entries, adds it. The entry
// last found for each kind is checked first, which spares hashing the key when calls look
// alike.
type setCache struct {
	mu   sync.Mutex
	m    atomic.Pointer[map[setKey]*setEntry]
	last [setKinds]atomic.Pointer[setEntry]
}

func (c *setCache) get(k setKey, build func() *setEntry) *setEntry {
	last := &c.last[k.kind]
	if e := last.Load(); e != nil && e.key == k {
		return e
	}
	if m := c.m.Load(); m != nil {
		if e, ok := (*m)[k]; ok {
			last.Store(e)
			return e
		}
	}
	e := build()
	e.key = k
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil && len(*old) >= maxCachedSets {
		return e
	}
	m := make(map[setKey]*setEntry, 1+lenOf(old))
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[k] = e
	c.m.Store(&m)
	return e
}

// reset forgets every set (after Watch learned provider names).
func (c *setCache) reset() {
	c.mu.Lock()
	c.m.Store(nil)
	for i := range c.last {
		c.last[i].Store(nil)
	}
	c.mu.Unlock()
}

func lenOf[K comparable, V any](m *map[K]V) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// nameCache holds span names, "chat gpt-4o" and "attempt primary", so that building one
// does not allocate per call.
type nameCache struct {
	mu sync.Mutex
	m  atomic.Pointer[map[[2]string]string]
}

func (c *nameCache) get(prefix, name string) string {
	if name == "" {
		return prefix
	}
	k := [2]string{prefix, name}
	if m := c.m.Load(); m != nil {
		if s, ok := (*m)[k]; ok {
			return s
		}
	}
	s := prefix + " " + name
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil && len(*old) >= maxCachedSpanName {
		return s
	}
	m := make(map[[2]string]string, 1+lenOf(old))
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[k] = s
	c.m.Store(&m)
	return s
}
