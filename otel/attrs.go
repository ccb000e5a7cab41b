package otel

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
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

	keyUpstream    = attribute.Key("llmclient.upstream")
	keyBudget      = attribute.Key("llmclient.budget")
	keyBudgetHard  = attribute.Key("llmclient.budget.hard")
	keyTarget      = attribute.Key("llmclient.target")
	keyAction      = attribute.Key("llmclient.action")
	keyKey         = attribute.Key("llmclient.key")
	keyAttempt     = attribute.Key("llmclient.attempt")
	keyAttempts    = attribute.Key("llmclient.attempts")
	keyCallID      = attribute.Key("llmclient.call_id")
	keyPartition   = attribute.Key("llmclient.partition")
	keyWaited      = attribute.Key("llmclient.waited")
	keyLimiterWait = attribute.Key("llmclient.limiter_wait")
	keyLocal       = attribute.Key("llmclient.local")
	keyRetry       = attribute.Key("llmclient.retry")
	keyHedge       = attribute.Key("llmclient.hedge")
	keyFailover    = attribute.Key("llmclient.failover")
	keyFallback    = attribute.Key("llmclient.fallback")
	keyEstimated   = attribute.Key("llmclient.estimated_tokens")
	// keyUsageEstimated marks gen_ai.usage.* as the Client's estimate, not the upstream's
	// report (see WithEstimatedUsage).
	keyUsageEstimated = attribute.Key("llmclient.usage_estimated")
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
	errorTypeOther    = "_OTHER" // the error.type of a call that panicked
	maxCachedSets     = 4096
	maxCachedStarts   = 1024
)

// errorType is the error.type of a class: its name ("rate_limited", "timeout", ...),
// or "" for success.
func errorType(c failure.Class) string {
	if c == failure.None {
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
	class                                    failure.Class
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
		e.in = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(append(kvs, str(keyTokenType, tokenInput))...))}
		e.out = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(append(kvs, str(keyTokenType, tokenOutput))...))}
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
	e.span = []attribute.KeyValue{str(keyOperation, op), str(keyProvider, t.providerName(upstream)), str(keyUpstream, upstream)}
	if model != "" {
		e.span = append(e.span, str(keyRequestModel, model))
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
	if e, ok := c.m.load(k.hash(), *k); ok {
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
	c.m.store(k.hash(), *k, e, maxCachedSets)
	return e
}

// reset forgets every set (after Watch learned provider names).
func (c *setCache) reset() {
	c.m.reset()
	for i := range c.last {
		c.last[i].Store(nil)
	}
}

// cowMap is a map split into cowShards copy-on-write shards by a hash of the key that
// the caller passes: a load takes no lock and allocates nothing; a store copies only its
// shard's map, under the shard's lock, so a new entry costs the same however many the
// map holds. Beyond max entries in all, a value is not kept. It is safe for concurrent
// use.
type cowMap[K comparable, V any] struct {
	n      atomic.Int64 // entries, over every shard
	shards [cowShards]cowShard[K, V]
}

type cowShard[K comparable, V any] struct {
	mu sync.Mutex
	m  atomic.Pointer[map[K]V]
}

// cowShards is how many shards a cowMap has: with maxCachedSets entries, a store copies
// about 16.
const cowShards = 256

func (c *cowMap[K, V]) shard(h uint64) *cowShard[K, V] {
	return &c.shards[(h*0x9E3779B97F4A7C15)>>56] // the top 8 bits of a Fibonacci hash
}

func (c *cowMap[K, V]) load(h uint64, k K) (V, bool) {
	if m := c.shard(h).m.Load(); m != nil {
		v, ok := (*m)[k]
		return v, ok
	}
	var zero V
	return zero, false
}

func (c *cowMap[K, V]) store(h uint64, k K, v V, max int) {
	sh := c.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	old := sh.m.Load()
	n := 0
	if old != nil {
		n = len(*old)
		if _, ok := (*old)[k]; ok {
			return // another caller kept one first
		}
	}
	for {
		total := c.n.Load()
		if total >= int64(max) {
			return
		}
		if c.n.CompareAndSwap(total, total+1) {
			break
		}
	}
	m := make(map[K]V, n+1)
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[k] = v
	sh.m.Store(&m)
}

func (c *cowMap[K, V]) reset() {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		if old := sh.m.Load(); old != nil {
			c.n.Add(-int64(len(*old)))
			sh.m.Store(nil)
		}
		sh.mu.Unlock()
	}
}

// hashSeed seeds the hashes that pick a cowMap's shard.
var hashSeed = maphash.MakeSeed()

// hash picks k's shard: the strings a caller can vary (models) are hashed, the other
// fields mixed in.
func (k *setKey) hash() uint64 {
	h := maphash.String(hashSeed, k.model) ^ 3*maphash.String(hashSeed, k.respModel) ^ 5*maphash.String(hashSeed, k.upstream)
	return h ^ uint64(k.kind) ^ uint64(k.class)<<8 ^ uint64(k.status)<<16 ^ uint64(len(k.key))<<32 ^ uint64(len(k.aux))<<40 ^
		uint64(len(k.op))<<48
}

// The gen_ai.response.finish_reasons of the finish reasons llmclient names, made once:
// an attribute value is immutable, and building a string slice one allocates twice.
var (
	finishStop          = keyFinishReasons.StringSlice([]string{string(finish.Stop)})
	finishLength        = keyFinishReasons.StringSlice([]string{string(finish.Length)})
	finishToolCalls     = keyFinishReasons.StringSlice([]string{string(finish.ToolCalls)})
	finishContentFilter = keyFinishReasons.StringSlice([]string{string(finish.ContentFilter)})
	finishRefusal       = keyFinishReasons.StringSlice([]string{string(finish.Refusal)})
	finishOther         = keyFinishReasons.StringSlice([]string{string(finish.Other)})
)

// finishReasons is the gen_ai.response.finish_reasons attribute of a call that ended
// for reason r.
func finishReasons(r finish.Reason) attribute.KeyValue {
	switch r {
	case finish.Stop:
		return finishStop
	case finish.Length:
		return finishLength
	case finish.ToolCalls:
		return finishToolCalls
	case finish.ContentFilter:
		return finishContentFilter
	case finish.Refusal:
		return finishRefusal
	case finish.Other:
		return finishOther
	}
	return keyFinishReasons.StringSlice([]string{clampValue(string(r))})
}

// MaxValueLen is the most bytes of a string attribute value, and of the model in a call
// span's name, that a Telemetry records: model names, upstream names, partitions, key
// labels and the like come from callers (a gateway passes its clients' model names on),
// and each distinct value is kept for the process's life, in the Telemetry's attribute
// sets and in the metric SDK's. A longer value is cut, at a rune boundary, to at most
// MaxValueLen bytes ending with "…"; values that differ only beyond the cut share their
// metrics.
const MaxValueLen = 256

// clampValue returns s cut to MaxValueLen bytes as MaxValueLen says: s itself when it is
// no longer, else a copy (a substring would keep the whole value alive).
func clampValue(s string) string {
	if len(s) <= MaxValueLen {
		return s
	}
	n := MaxValueLen - len(ellipsis)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + ellipsis
}

const ellipsis = "…"

// str is the attribute k with the value v clamped (see MaxValueLen).
func str(k attribute.Key, v string) attribute.KeyValue { return k.String(clampValue(v)) }
