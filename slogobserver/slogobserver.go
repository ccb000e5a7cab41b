// Package slogobserver logs a Client's events with log/slog:
//
//	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
//	client, err := llmclient.New(
//		llmclient.WithObserver(slogobserver.New(logger)),
//		llmclient.WithUpstream(...),
//	)
//
// Each event becomes one record whose message is "llmclient " and the event's kind
// ("llmclient attempt", "llmclient call", ...), with the call's ID, upstream, model and
// key label, and what the kind reports. A failed attempt that the call then recovered
// from is not a warning: attempts log at DEBUG (success) and INFO (failure), and the call's
// own end (event.Call) logs at DEBUG on success and WARN on failure, so a WARN
// means the caller got an error. Records never contain an API key, nor any prompt or
// completion text: errors are named without the vendor's message unless
// WithErrorMessages says otherwise.
package slogobserver

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
)

// Option configures the observer New returns.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// DurationFormat is how durations appear in records.
type DurationFormat uint8

const (
	// DurationString renders a duration as Go writes it: "1.5s", "250ms". The default:
	// it reads the same in text and JSON logs.
	DurationString DurationFormat = iota
	// DurationSeconds renders a duration as a float number of seconds, 1.5, for log
	// stores that aggregate numbers.
	DurationSeconds
	// DurationNative passes the time.Duration to the handler as slog.Duration: the text
	// handler writes "1.5s", the JSON handler an integer number of nanoseconds.
	DurationNative
)

// levels holds the level of an event kind that succeeded and of one that failed.
type levels struct{ ok, failed slog.Level }

type config struct {
	levels    map[event.Kind]levels
	durations DurationFormat
	group     string
	attrs     []slog.Attr
	metadata  []string
	// refusalEvery spaces the records of refused calls per upstream (WithRefusalInterval).
	refusalEvery time.Duration
	// errorMessages logs errors' whole text (WithErrorMessages).
	errorMessages bool
}

// WithErrorMessages sets whether a record's "error" attribute is the error's whole text,
// with the vendor's message, which may quote the prompt (a 400 naming the offending
// content), a body snippet or a refusal, which are the answer's text. Default false: the
// error is named without them (llmclient.ErrorSummary: its class, upstream, status,
// vendor code and cause), so that records hold no prompt or completion text.
func WithErrorMessages(on bool) Option {
	return optionFunc(func(c *config) { c.errorMessages = on })
}

// defaultRefusalInterval is WithRefusalInterval's default.
const defaultRefusalInterval = 10 * time.Second

// WithRefusalInterval sets how often a refused call — one that ended with class
// unavailable (an open or forced breaker, a drained upstream, every key out), refused
// without an upstream call — is logged at the call's failed level, per upstream: the first
// refusal, then at most one per interval, carrying refused_unlogged, the number of
// refused calls logged at DEBUG since the last one at its level. 0 or a negative interval
// logs every refused call at the failed level. Default 10s. The breaker's own change of
// state is always logged, once; an attempt refused locally logs at the attempt's success
// level (DEBUG by default), as its call's record says what happened.
func WithRefusalInterval(d time.Duration) Option {
	return optionFunc(func(c *config) { c.refusalEvery = d })
}

// defaultLevels are the levels New starts from; kinds it does not list log at INFO, or
// WARN when they report a failure.
var defaultLevels = map[event.Kind]levels{
	event.Attempt:     {slog.LevelDebug, slog.LevelInfo},
	event.Call:        {slog.LevelDebug, slog.LevelWarn},
	event.Breaker:     {slog.LevelInfo, slog.LevelWarn},
	event.KeyCooldown: {slog.LevelInfo, slog.LevelInfo},
	event.KeyEvicted:  {slog.LevelWarn, slog.LevelWarn},
	event.Alert:       {slog.LevelError, slog.LevelError},
	event.Fallback:    {slog.LevelWarn, slog.LevelWarn},
	event.Failover:    {slog.LevelInfo, slog.LevelInfo},
	event.Hedge:       {slog.LevelInfo, slog.LevelInfo},
	// An operator's action is a fact worth a line, not a failure.
	event.Control: {slog.LevelInfo, slog.LevelInfo},
	// Cache lookups and stores come with most calls: DEBUG, like successful calls.
	event.CacheHit:           {slog.LevelDebug, slog.LevelDebug},
	event.CacheMiss:          {slog.LevelDebug, slog.LevelDebug},
	event.CacheGuardRejected: {slog.LevelDebug, slog.LevelDebug},
	event.CacheStored:        {slog.LevelDebug, slog.LevelDebug},
	// A soft threshold is the alarm before the cap; the cap refuses calls.
	event.Budget: {slog.LevelWarn, slog.LevelError},
}

var unknownKind = levels{slog.LevelInfo, slog.LevelWarn}

// WithLevel sets the levels of the events of kind: ok for those that report a success,
// failed for those that report a failure. An event reports a failure when it is an
// attempt or a call that failed (the caller's own cancellation excepted: it logs at ok),
// a breaker that opened, or one of the kinds that only report failures (key cooldown,
// key eviction, alert, failover, fallback; for these ok is not used). Defaults:
//
//	attempt        DEBUG / INFO
//	call           DEBUG / WARN
//	breaker        INFO  / WARN (opened)
//	key_cooldown   INFO
//	key_evicted    WARN
//	alert          ERROR
//	fallback       WARN
//	failover       INFO
//	cache_*        DEBUG (hit, miss, guard_rejected, stored)
//	budget         WARN (a soft threshold) / ERROR (the hard cap refused an attempt)
//	control        INFO
//	other kinds    INFO  / WARN
//
// A level below the handler's minimum turns the kind off: WithLevel(event.Attempt,
// slog.LevelDebug-4, slog.LevelDebug-4) logs no attempts under a DEBUG handler.
func WithLevel(kind event.Kind, ok, failed slog.Level) Option {
	return optionFunc(func(c *config) { c.levels[kind] = levels{ok, failed} })
}

// WithDurations sets how durations are rendered. Default DurationString.
func WithDurations(f DurationFormat) Option {
	return optionFunc(func(c *config) { c.durations = f })
}

// WithGroup puts each record's event attributes in a group, such as "llmclient": JSON
// handlers nest them in an object, text handlers prefix their keys ("llmclient.upstream").
// Attributes from WithAttrs stay outside the group. Default: no group.
func WithGroup(name string) Option {
	return optionFunc(func(c *config) { c.group = name })
}

// WithAttrs adds attributes to every record, outside the group of WithGroup (a service
// name, a component). Calls add up. Default: none.
func WithAttrs(attrs ...slog.Attr) Option {
	return optionFunc(func(c *config) { c.attrs = append(c.attrs, attrs...) })
}

// WithMetadata logs the values of these keys of the request's Metadata
// (llmclient.Request.Metadata), each as an attribute "metadata.<key>", on the events of a
// call that has them. Metadata can hold user identifiers, so nothing is logged unless
// named here. Calls add up. Default: none.
func WithMetadata(keys ...string) Option {
	return optionFunc(func(c *config) { c.metadata = append(c.metadata, keys...) })
}

// New returns an observer for llmclient.WithObserver that logs every event to logger
// (slog.Default() when nil), with the caller's context for handlers that read it (trace
// IDs). It is safe for concurrent use. Attributes, by kind:
//
//   - every event: event (the kind), call_id (events of a call), upstream, model, key
//     (a label such as "key#2", never the key), partition, the WithMetadata keys, error;
//   - attempt: attempt (its number), class, status, latency, waited, limiter_wait,
//     time_to_first_token, local (refused without an upstream call), retry,
//     estimated_tokens, input_tokens, output_tokens;
//   - call: attempts, class, status, latency (the whole call), time_to_first_token,
//     chunks and time_per_chunk (streams), input_tokens, output_tokens, finish_reason,
//     response_model, refused_unlogged (see WithRefusalInterval);
//   - breaker: from, to; key_cooldown and key_evicted: class, until; failover: target,
//     class; alert and fallback: class, status; control: action (what an operator did),
//     until (a key eviction's end).
//
// Zero counts and durations, and false flags, are left out, except an attempt's or a
// call's latency.
func New(logger *slog.Logger, opts ...Option) func(context.Context, llmclient.Event) {
	cfg := config{levels: make(map[event.Kind]levels, len(defaultLevels)), refusalEvery: defaultRefusalInterval}
	for k, l := range defaultLevels {
		cfg.levels[k] = l
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if logger == nil {
		logger = slog.Default()
	}
	if len(cfg.attrs) > 0 {
		args := make([]any, len(cfg.attrs))
		for i, a := range cfg.attrs {
			args[i] = a
		}
		logger = logger.With(args...)
	}
	if cfg.group != "" {
		logger = logger.WithGroup(cfg.group)
	}
	o := &observer{logger: logger, cfg: cfg, refusals: map[string]*refusals{}}
	return o.observe
}

type observer struct {
	logger *slog.Logger
	cfg    config

	mu       sync.Mutex
	refusals map[string]*refusals // by upstream
}

// refusals is what the observer logged of one upstream's refused calls.
type refusals struct {
	last     time.Time // the last one logged at the failed level
	unlogged int       // refused calls logged at DEBUG since
}

// maxRefusalUpstreams bounds the refusal map, whatever upstream names events carry.
const maxRefusalUpstreams = 1024

// refused reports whether a refused call's record is due at its failed level, with the
// number of refused calls of the upstream logged below it since the last one.
func (o *observer) refused(upstream string, now time.Time) (due bool, unlogged int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r := o.refusals[upstream]
	if r == nil {
		if len(o.refusals) >= maxRefusalUpstreams {
			clear(o.refusals)
		}
		r = &refusals{}
		o.refusals[upstream] = r
	}
	if !r.last.IsZero() && now.Sub(r.last) < o.cfg.refusalEvery {
		r.unlogged++
		return false, 0
	}
	unlogged, r.last, r.unlogged = r.unlogged, now, 0
	return true, unlogged
}

// failed reports whether e reports a failure, for its level.
func failed(e *llmclient.Event) bool {
	switch e.Kind {
	case event.Attempt, event.Call:
		return e.Class != failure.None && e.Class != failure.Canceled
	case event.Breaker:
		return e.To == breaker.Open
	case event.KeyCooldown, event.KeyEvicted, event.Alert,
		event.Fallback, event.Failover:
		return true
	}
	return e.Err != nil || e.Class != failure.None
}

// levelOK is the level of e's kind when it succeeds.
func (o *observer) levelOK(e *llmclient.Event) slog.Level {
	if l, ok := o.cfg.levels[e.Kind]; ok {
		return l.ok
	}
	return unknownKind.ok
}

func (o *observer) level(e *llmclient.Event) slog.Level {
	l, ok := o.cfg.levels[e.Kind]
	if !ok {
		l = unknownKind
	}
	if failed(e) {
		return l.failed
	}
	return l.ok
}

func (o *observer) observe(ctx context.Context, e llmclient.Event) {
	level := o.level(&e)
	unlogged := 0
	switch {
	case e.Kind == event.Attempt && e.Local && failed(&e):
		level = o.levelOK(&e)
	case e.Kind == event.Call && e.Class == failure.Unavailable && o.cfg.refusalEvery > 0:
		var due bool
		if due, unlogged = o.refused(e.Upstream, e.Time); !due {
			level = slog.LevelDebug
		}
	}
	if !o.logger.Enabled(ctx, level) {
		return
	}
	a := make([]slog.Attr, 0, 20)
	a = append(a, slog.String("event", e.Kind.String()))
	if e.CallID != 0 {
		a = append(a, slog.Uint64("call_id", e.CallID))
	}
	a = str(a, "upstream", e.Upstream)
	a = str(a, "model", e.Model)
	a = str(a, "key", e.Key)
	a = str(a, "partition", e.Partition)
	for _, k := range o.cfg.metadata {
		if v, ok := e.Metadata[k]; ok {
			a = append(a, slog.String("metadata."+k, v))
		}
	}
	switch e.Kind {
	case event.Attempt:
		a = append(a, slog.Int("attempt", e.Attempt), slog.String("class", e.Class.String()))
		a = num(a, "status", e.Status)
		a = append(a, o.dur("latency", e.Latency))
		a = o.optDur(a, "waited", e.Waited)
		a = o.optDur(a, "limiter_wait", e.LimiterWait)
		a = o.optDur(a, "time_to_first_token", e.TimeToFirstToken)
		a = flag(a, "local", e.Local)
		a = flag(a, "retry", e.Retry)
		a = flag(a, "hedge", e.Hedge)
		a = flag(a, "embed", e.Embed)
		a = num(a, "estimated_tokens", e.EstimatedTokens)
		a = tokens(a, &e)
		a = cost(a, &e)
	case event.Call:
		a = append(a, slog.Int("attempts", e.Attempt), slog.String("class", e.Class.String()))
		a = num(a, "status", e.Status)
		a = append(a, o.dur("latency", e.Latency))
		a = o.optDur(a, "time_to_first_token", e.TimeToFirstToken)
		a = num(a, "chunks", e.Chunks)
		a = o.optDur(a, "time_per_chunk", e.TimePerChunk)
		a = tokens(a, &e)
		a = str(a, "finish_reason", string(e.FinishReason))
		a = str(a, "response_model", e.ResponseModel)
		a = flag(a, "embed", e.Embed)
		a = num(a, "refused_unlogged", unlogged)
		a = cost(a, &e)
	case event.Budget:
		a = append(a, slog.Int("attempt", e.Attempt), slog.String("class", e.Class.String()))
		if b := e.Budget; b != nil {
			a = append(a, slog.String("budget", b.Name))
			a = str(a, "budget_partition", b.Partition)
			a = append(a, slog.Float64("fraction", b.Fraction), slog.String("spent", b.Spent.String()),
				slog.String("reserved", b.Reserved.String()), slog.String("cap", b.Cap.String()),
				slog.Time("window_end", b.End))
			a = flag(a, "hard", b.Hard)
			a = str(a, "reroute", b.Reroute)
		}
	case event.Breaker:
		a = append(a, slog.String("from", e.From.String()), slog.String("to", e.To.String()))
	case event.KeyCooldown, event.KeyEvicted:
		a = append(a, slog.String("class", e.Class.String()), slog.Time("until", e.Until))
	case event.Failover:
		a = append(a, slog.String("target", e.Target), slog.String("class", e.Class.String()))
	case event.Hedge:
		a = append(a, slog.String("target", e.Target), slog.Int("attempt", e.Attempt))
	case event.Control:
		a = append(a, slog.String("action", e.Action))
		if !e.Until.IsZero() {
			a = append(a, slog.Time("until", e.Until))
		}
	case event.CacheHit, event.CacheMiss, event.CacheGuardRejected, event.CacheStored:
		a = flag(a, "semantic", e.Semantic)
		if e.Similarity != 0 {
			a = append(a, slog.Float64("similarity", e.Similarity))
		}
		a = o.optDur(a, "age", e.Age)
	default:
		if e.Class != failure.None {
			a = append(a, slog.String("class", e.Class.String()))
		}
		a = num(a, "status", e.Status)
	}
	if e.Err != nil {
		text := e.Err.Error()
		if !o.cfg.errorMessages {
			if text = llmclient.ErrorSummary(e.Err); text == "" {
				text = e.Class.String()
			}
		}
		a = append(a, slog.String("error", text))
	}
	o.logger.LogAttrs(ctx, level, "llmclient "+e.Kind.String(), a...)
}

func (o *observer) dur(key string, d time.Duration) slog.Attr {
	switch o.cfg.durations {
	case DurationSeconds:
		return slog.Float64(key, d.Seconds())
	case DurationNative:
		return slog.Duration(key, d)
	}
	return slog.String(key, d.String())
}

func (o *observer) optDur(a []slog.Attr, key string, d time.Duration) []slog.Attr {
	if d == 0 {
		return a
	}
	return append(a, o.dur(key, d))
}

// cost adds the event's cost as "cost" ("$0.0012", "~$0.0012" estimated, "≥$0.0012"
// partly known), and "cost_usd" as a number when it is known; nothing without pricing.
func cost(a []slog.Attr, e *llmclient.Event) []slog.Attr {
	c := e.Cost
	if !c.Known && c.Amount == 0 {
		return a
	}
	a = append(a, slog.String("cost", c.String()))
	if c.Known {
		a = append(a, slog.Float64("cost_usd", c.Amount.Dollars()))
	}
	return a
}

func str(a []slog.Attr, key, v string) []slog.Attr {
	if v == "" {
		return a
	}
	return append(a, slog.String(key, v))
}

func num(a []slog.Attr, key string, v int) []slog.Attr {
	if v == 0 {
		return a
	}
	return append(a, slog.Int(key, v))
}

func flag(a []slog.Attr, key string, v bool) []slog.Attr {
	if !v {
		return a
	}
	return append(a, slog.Bool(key, true))
}

func tokens(a []slog.Attr, e *llmclient.Event) []slog.Attr {
	if e.InputTokens == 0 && e.OutputTokens == 0 {
		return a
	}
	return append(a, slog.Int("input_tokens", e.InputTokens), slog.Int("output_tokens", e.OutputTokens))
}
