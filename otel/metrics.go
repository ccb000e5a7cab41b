package otel

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
)

// The bucket boundaries the GenAI semantic conventions recommend: token counts in powers
// of four, durations in powers of two from 10ms.
var (
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	// attemptBuckets and waitBuckets are llmclient's own.
	attemptBuckets = []float64{1, 2, 3, 4, 5, 6, 8, 10, 15, 20}
	waitBuckets    = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
)

// instruments are the Telemetry's metric instruments.
type instruments struct {
	duration, ttfc, tpoc, limiterWait metric.Float64Histogram
	tokens, attemptsPerCall           metric.Int64Histogram
	refusals                          metric.Int64Counter
	failovers, fallbacks, hedges      metric.Int64Counter
	continuations                     metric.Int64Counter
	breakerTransitions                metric.Int64Counter
	cooldowns, evictions, alerts      metric.Int64Counter
	cacheLookups, cacheStores         metric.Int64Counter
	cost                              metric.Float64Counter
	budgetEvents                      metric.Int64Counter

	// The gauges Watch observes.
	breakerState, upstreamInFlight, keyState metric.Int64ObservableGauge
	limiterRemaining, limiterCapacity        metric.Float64ObservableGauge
	limiterLimit, reportedLimit              metric.Int64ObservableGauge
	reportedRemaining                        metric.Float64ObservableGauge
	cacheBytes, cacheEntries                 metric.Int64ObservableGauge
	cacheHitRate                             metric.Float64ObservableGauge
	cacheEvictions                           metric.Int64ObservableCounter
	attempts                                 metric.Int64ObservableCounter // over counts
	counts                                   attemptCounts
	observables                              []metric.Observable
}

func (m *instruments) init(meter metric.Meter) error {
	var errs []error
	fh := func(name, unit, desc string, bounds []float64) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(bounds...))
		errs = append(errs, err)
		return h
	}
	ih := func(name, unit, desc string, bounds []float64) metric.Int64Histogram {
		h, err := meter.Int64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(bounds...))
		errs = append(errs, err)
		return h
	}
	ctr := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	ig := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, err := meter.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		m.observables = append(m.observables, g)
		return g
	}
	fg := func(name, unit, desc string) metric.Float64ObservableGauge {
		g, err := meter.Float64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		m.observables = append(m.observables, g)
		return g
	}
	var (
		cost metric.Float64Counter
		err  error
	)
	m.duration = fh("gen_ai.client.operation.duration", "s", "GenAI operation duration.", durationBuckets)
	m.tokens = ih("gen_ai.client.token.usage", "{token}", "Number of input and output tokens used.", tokenBuckets)
	m.ttfc = fh("gen_ai.client.operation.time_to_first_chunk", "s",
		"Time to receive the first chunk, from the call's start to the first chunk of the response stream.", durationBuckets)
	m.tpoc = fh("gen_ai.client.operation.time_per_output_chunk", "s",
		"Time per output chunk after the first one.", durationBuckets)
	m.attemptsPerCall = ih("llmclient.client.attempts_per_call", "{attempt}",
		"Attempts per call, local refusals included.", attemptBuckets)
	m.limiterWait = fh("llmclient.limiter.wait", "s",
		"Time an attempt waited in the Client's admission: partition limiter, cooling keys, key limiter.", waitBuckets)
	m.attempts, err = m.counts.register(meter)
	errs = append(errs, err)
	m.refusals = ctr("llmclient.client.refusals", "{attempt}", "Attempts refused locally, without an upstream call.")
	m.failovers = ctr("llmclient.client.failovers", "{failover}", "Calls moved from one upstream to the next.")
	m.continuations = ctr("llmclient.client.continuations", "{continuation}",
		"Committed streams that broke and went on on another attempt (WithStreamContinuation).")
	m.hedges = ctr("llmclient.client.hedges", "{hedge}", "Hedged attempts sent while an earlier attempt was waiting.")
	m.fallbacks = ctr("llmclient.client.fallbacks", "{call}", "Calls answered by the fallback function.")
	m.breakerTransitions = ctr("llmclient.breaker.transitions", "{transition}", "Circuit breaker state changes.")
	m.cooldowns = ctr("llmclient.key.cooldowns", "{cooldown}", "Keys paused after a rate limit.")
	m.evictions = ctr("llmclient.key.evictions", "{eviction}", "Keys taken out of their pool (auth or quota failure).")
	m.alerts = ctr("llmclient.alerts", "{alert}", "Failures that need a human: a revoked key, an exhausted quota.")
	cost, err = meter.Float64Counter("llmclient.client.cost", metric.WithUnit("USD"),
		metric.WithDescription("What calls cost, every attempt of a call together, as far as it is priced (llmclient.WithPricing)."))
	errs = append(errs, err)
	m.cost = cost
	m.budgetEvents = ctr("llmclient.budget.events", "{event}",
		"Budget thresholds reached: a soft fraction, or the hard cap refusing an attempt (llmclient.budget.hard).")

	m.breakerState = ig("llmclient.breaker.state", "", "1 for the breaker's current state, 0 for the others.")
	m.upstreamInFlight = ig("llmclient.upstream.in_flight", "{attempt}", "Attempts in flight on the upstream.")
	m.keyState = ig("llmclient.key.state", "", "1 for the key's current state (ready, cooling, evicted), 0 for the others.")
	m.limiterRemaining = fg("llmclient.limiter.remaining", "",
		"What the key's limiter holds now: requests or tokens in its bucket, free concurrency slots.")
	m.limiterCapacity = fg("llmclient.limiter.capacity", "", "The size of the key's limiter bucket, or its concurrency slots.")
	m.limiterLimit = ig("llmclient.limiter.limit", "", "The key's configured limit: RPM, TPM or maximum concurrency.")
	m.reportedRemaining = fg("llmclient.upstream.ratelimit.remaining", "",
		"The key's remaining quota as the upstream last reported it (x-ratelimit-remaining-*).")
	m.reportedLimit = ig("llmclient.upstream.ratelimit.limit", "",
		"The key's quota as the upstream last reported it (x-ratelimit-limit-*).")

	m.cacheLookups = ctr("llmclient.cache.lookups", "{lookup}", "Cache lookups, by result: hit, miss, guard_rejected.")
	m.cacheStores = ctr("llmclient.cache.stores", "{entry}", "Answers stored by a cache.")
	m.cacheBytes = ig("llmclient.cache.bytes", "By", "What a registered cache holds, in bytes.")
	m.cacheEntries = ig("llmclient.cache.entries", "{entry}", "The entries a registered cache holds.")
	m.cacheHitRate = fg("llmclient.cache.hit_rate", "1", "A registered cache's hits over its lookups since it was created.")
	ec, err := meter.Int64ObservableCounter("llmclient.cache.evictions", metric.WithUnit("{entry}"),
		metric.WithDescription("Entries a registered cache dropped to make room."))
	errs = append(errs, err)
	m.cacheEvictions = ec
	m.observables = append(m.observables, ec)
	return errors.Join(errs...)
}

// opOf is the operation name of a call: its tracing state's, else chat.
func opOf(c *call) string {
	if c != nil && c.op != "" {
		return c.op
	}
	return opChat
}

// opFor is the operation name of an event of a call: embeddings for Client.Embed's.
func opFor(c *call, e *llmclient.Event) string {
	if e.Embed {
		return opEmbeddings
	}
	return opOf(c)
}

// recordCache counts a cache's lookups (hit, miss, guard_rejected) and stores, by
// llmclient.cache.layer (exact, semantic).
func (t *Telemetry) recordCache(ctx context.Context, e *llmclient.Event) {
	layer := "exact"
	if e.Semantic {
		layer = "semantic"
	}
	result, ctr := "", t.m.cacheLookups
	switch e.Kind {
	case event.CacheHit:
		result = "hit"
	case event.CacheMiss:
		result = "miss"
	case event.CacheGuardRejected:
		result = "guard_rejected"
	default:
		ctr = t.m.cacheStores
	}
	k := setKey{kind: setCacheOp, aux: layer, key: result}
	s := t.sets.get(k, func() *setEntry {
		kvs := []attribute.KeyValue{str(keyCacheLayer, k.aux)}
		if k.key != "" {
			kvs = append(kvs, str(keyCacheResult, k.key))
		}
		return newSetEntry(kvs, false)
	})
	ctr.Add(ctx, 1, s.add...)
}

// recordAttempt records an attempt: an upstream call or a local refusal, and its wait in
// the limiter. It returns the attribute set of an upstream call (which also serves its
// span), nil for a refusal.
func (t *Telemetry) recordAttempt(ctx context.Context, c *call, e *llmclient.Event) *setEntry {
	m := &t.m
	var attempt *setEntry
	if e.Local {
		k := setKey{kind: setRefusal, upstream: clampValue(e.Upstream), class: e.Class, aux: refusalReason(e.Err)}
		s := t.sets.get(k, func() *setEntry {
			return newSetEntry([]attribute.KeyValue{str(keyUpstream, k.upstream),
				str(keyErrorType, errorType(k.class)), str(keyReason, k.aux)}, false)
		})
		m.refusals.Add(ctx, 1, s.add...)
	} else {
		op := opFor(c, e)
		s := t.sets.lastAttempt(op, e)
		if s == nil {
			k := setKey{kind: setAttempt, op: op, upstream: clampValue(e.Upstream), model: clampValue(metricModel(e)), class: e.Class, status: e.Status}
			if s = t.sets.lookup(&k); s == nil {
				s = t.sets.add(&k, t.attemptSet(&k))
			}
		}
		s.attempts.n.Add(1)
		attempt = s
	}
	if e.LimiterWait <= 0 {
		return attempt
	}
	k := setKey{kind: setWait, upstream: clampValue(e.Upstream), key: clampValue(e.Key)}
	s := t.sets.get(k, func() *setEntry {
		kvs := []attribute.KeyValue{str(keyUpstream, k.upstream)}
		if k.key != "" {
			kvs = append(kvs, str(keyKey, k.key))
		}
		return newSetEntry(kvs, false)
	})
	m.limiterWait.Record(ctx, e.LimiterWait.Seconds(), s.rec...)
	return attempt
}

// attemptSet makes the set of the upstream calls of k, an attempt's key.
func (t *Telemetry) attemptSet(k *setKey) *setEntry {
	kvs := []attribute.KeyValue{str(keyOperation, k.op), str(keyProvider, t.providerName(k.upstream)),
		str(keyUpstream, k.upstream)}
	if k.model != "" {
		kvs = append(kvs, str(keyRequestModel, k.model))
	}
	if et := errorType(k.class); et != "" {
		kvs = append(kvs, str(keyErrorType, et))
	}
	if k.status != 0 {
		kvs = append(kvs, keyStatus.Int(k.status))
	}
	e := newSetEntry(kvs, false)
	e.attempts = t.m.counts.cell(e.set)
	return t.withAttemptSpan(e, k.op, k.upstream, k.model)
}

// refusalReason says which layer refused an attempt locally.
func refusalReason(err error) string {
	switch {
	case errors.Is(err, llmclient.ErrCircuitOpen):
		return "breaker_open"
	case errors.Is(err, llmclient.ErrNoKey):
		return "no_key"
	case errors.Is(err, llmclient.ErrRateLimited):
		return "limiter"
	case errors.Is(err, llmclient.ErrRetryBudget):
		return "retry_budget"
	case errors.Is(err, budget.ErrExceeded), errors.Is(err, budget.ErrNoPrice), errors.Is(err, budget.ErrCostlyFailover):
		return "budget"
	case errors.Is(err, llmclient.ErrUnsupported):
		return "unsupported"
	case errors.Is(err, llmclient.ErrNoUpstream):
		return "no_upstream"
	}
	return "other"
}

// metricModel is the model a call's or an attempt's metrics and span carry: none when it
// failed because the model is unknown (failure.NotFound: no upstream serves it, or the
// vendor does not know it). Callers choose model names; those that route nowhere must not
// each add a series to every instrument.
func metricModel(e *llmclient.Event) string {
	if e.Class == failure.NotFound {
		return ""
	}
	return e.Model
}

// recordCall records a call's end: the GenAI duration, token usage and stream timings,
// and its attempts. It returns the call's attribute set, which also serves its span.
func (t *Telemetry) recordCall(ctx context.Context, c *call, e *llmclient.Event) *setEntry {
	m := &t.m
	op := opFor(c, e)
	s := t.sets.lastCall(op, e)
	if s == nil {
		k := setKey{kind: setCall, op: op, upstream: clampValue(e.Upstream), model: clampValue(metricModel(e)), respModel: clampValue(e.ResponseModel), class: e.Class}
		// A set under a response model's own name exists only once the model was admitted.
		if s = t.sets.lookup(&k); s == nil {
			if k.respModel = t.respModels.admit(k.upstream, k.model, k.respModel); k.respModel == responseModelOther {
				s = t.sets.lookup(&k)
			}
			if s == nil {
				s = t.sets.add(&k, t.withCallSpan(newSetEntry(t.callAttrs(&k), true), &k))
			}
		}
	}
	m.duration.Record(ctx, e.Latency.Seconds(), s.rec...)
	m.attemptsPerCall.Record(ctx, int64(e.Attempt), s.rec...)
	if (e.InputTokens > 0 || e.OutputTokens > 0) && (!e.UsageEstimated || t.estimatedUsage) {
		m.tokens.Record(ctx, int64(e.InputTokens), s.in...)
		m.tokens.Record(ctx, int64(e.OutputTokens), s.out...)
	}
	if e.Cost.Amount > 0 { // a partly known cost counts what is known
		m.cost.Add(ctx, e.Cost.Amount.Dollars(), s.add...)
	}
	if e.Chunks > 0 { // a stream that got its first chunk
		m.ttfc.Record(ctx, e.TimeToFirstToken.Seconds(), s.rec...)
		// The Client times the stream, not each chunk: each interval after the first
		// chunk is recorded at the stream's mean, which keeps the count and the sum exact.
		per := e.TimePerChunk.Seconds()
		for i := 1; i < e.Chunks; i++ {
			m.tpoc.Record(ctx, per, s.rec...)
		}
	}
	return s
}

// withCallSpan adds to e the attributes a call span gets at its end from the call's set:
// provider and upstream (when the call reached one) and the response model, unless the
// metrics record it as responseModelOther: the span then takes the call's own (see end).
func (t *Telemetry) withCallSpan(e *setEntry, k *setKey) *setEntry {
	e.span = make([]attribute.KeyValue, 0, 3)
	if k.upstream != "" {
		e.span = append(e.span, str(keyProvider, t.providerName(k.upstream)), str(keyUpstream, k.upstream))
	}
	if k.respModel != "" && k.respModel != responseModelOther {
		e.span = append(e.span, str(keyResponseModel, k.respModel))
	}
	return e
}

// responseModelOther is the gen_ai.response.model of the call metrics for the response
// models of an upstream and request model beyond the first maxResponseModels.
const responseModelOther = "_OTHER"

// maxResponseModels is how many distinct response models the call metrics keep by name
// for each upstream and request model: a model alias answered by a dated version or two
// keeps its names; an upstream that names a new model in every answer (a router, a
// hostile vendor) adds no more than this many series to each call instrument.
const maxResponseModels = 8

// maxResponseRoutes bounds the upstream and request model pairs responseModels keeps;
// the response models of pairs beyond it are recorded as responseModelOther.
const maxResponseRoutes = maxCachedSets

// responseModels admits the response models that the call metrics name, per upstream
// and request model. It is consulted only when a call's attribute set is not cached.
type responseModels struct {
	mu     sync.Mutex
	routes map[[2]string][]string
}

// admit returns the gen_ai.response.model the call metrics record for a response from
// upstream for model: resp itself while fewer than maxResponseModels others were seen
// for the pair, else responseModelOther.
func (r *responseModels) admit(upstream, model, resp string) string {
	if resp == "" {
		return ""
	}
	k := [2]string{upstream, model}
	r.mu.Lock()
	defer r.mu.Unlock()
	seen, ok := r.routes[k]
	if !ok && len(r.routes) >= maxResponseRoutes {
		return responseModelOther
	}
	for _, m := range seen {
		if m == resp {
			return resp
		}
	}
	if len(seen) >= maxResponseModels {
		return responseModelOther
	}
	if r.routes == nil {
		r.routes = make(map[[2]string][]string)
	}
	r.routes[k] = append(seen, resp)
	return resp
}

// callAttrs are the attributes of the GenAI call metrics.
func (t *Telemetry) callAttrs(k *setKey) []attribute.KeyValue {
	kvs := make([]attribute.KeyValue, 0, 7)
	kvs = append(kvs, str(keyOperation, k.op), str(keyProvider, t.providerName(k.upstream)))
	if k.upstream != "" {
		kvs = append(kvs, str(keyUpstream, k.upstream))
	}
	if k.model != "" {
		kvs = append(kvs, str(keyRequestModel, k.model))
	}
	if k.respModel != "" {
		kvs = append(kvs, str(keyResponseModel, k.respModel))
	}
	if et := errorType(k.class); et != "" {
		kvs = append(kvs, str(keyErrorType, et))
	}
	return kvs
}

// recordDecision counts failovers, fallbacks, breaker changes, key cooldowns, evictions
// and alerts.
func (t *Telemetry) recordDecision(ctx context.Context, e *llmclient.Event) {
	k := setKey{kind: setDecision, upstream: clampValue(e.Upstream), key: clampValue(e.Key), class: e.Class, status: int(e.Kind)}
	var ctr metric.Int64Counter
	switch e.Kind {
	case event.Failover:
		ctr, k.aux = t.m.failovers, clampValue(e.Target)
	case event.Hedge:
		ctr, k.aux = t.m.hedges, clampValue(e.Target)
	case event.Continuation:
		ctr, k.aux = t.m.continuations, clampValue(e.Target)
	case event.Fallback:
		ctr = t.m.fallbacks
	case event.Breaker:
		ctr, k.aux = t.m.breakerTransitions, e.To.String()
	case event.KeyCooldown:
		ctr = t.m.cooldowns
	case event.KeyEvicted:
		ctr = t.m.evictions
	case event.Alert:
		ctr = t.m.alerts
	default:
		return
	}
	s := t.sets.get(k, func() *setEntry {
		var kvs []attribute.KeyValue
		if k.upstream != "" {
			kvs = append(kvs, str(keyUpstream, k.upstream))
		}
		if k.key != "" {
			kvs = append(kvs, str(keyKey, k.key))
		}
		if et := errorType(k.class); et != "" {
			kvs = append(kvs, str(keyErrorType, et))
		}
		switch e.Kind {
		case event.Failover, event.Hedge, event.Continuation:
			kvs = append(kvs, str(keyTarget, k.aux))
		case event.Breaker:
			kvs = append(kvs, str(keyBreakerState, k.aux))
		}
		return newSetEntry(kvs, false)
	})
	ctr.Add(ctx, 1, s.add...)
}

// recordBudget counts a budget event, by budget name and whether it was the hard cap.
// Budget events are rare: their attributes are built each time.
func (t *Telemetry) recordBudget(ctx context.Context, e *llmclient.Event) {
	if e.Budget == nil {
		return
	}
	t.m.budgetEvents.Add(ctx, 1, metric.WithAttributes(str(keyBudget, e.Budget.Name), keyBudgetHard.Bool(e.Budget.Hard)))
}
