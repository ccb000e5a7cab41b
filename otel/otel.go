package otel

import (
	"context"
	"errors"
	"sync/atomic"

	gotel "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
)

// ScopeName is the instrumentation scope of the tracer and meter a Telemetry uses.
const ScopeName = "github.com/llmclient/llmclient/otel"

// Telemetry turns a Client's events into OpenTelemetry spans and metrics. Create one with
// New and hand its methods to the Client: Observe as its observer, Middleware around
// Complete and Stream, Transport around Client.Transport, and Watch for the gauges of its
// state. A Telemetry may serve several Clients. It is safe for concurrent use.
type Telemetry struct {
	tracer   trace.Tracer
	meter    metric.Meter
	m        instruments
	provider func(upstream string) string
	// adapters maps upstream names to gen_ai.provider.name, learned by Watch.
	adapters atomic.Pointer[map[string]string]
	sets     setCache
	starts   startCache
	// respModels bounds the response models the call metrics name.
	respModels responseModels
	// errorMessages is WithErrorMessages, estimatedUsage WithEstimatedUsage.
	errorMessages, estimatedUsage bool
}

// Option configures New.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	tp        trace.TracerProvider
	mp        metric.MeterProvider
	provider  func(string) string
	errors    bool
	estimated bool
}

// WithTracerProvider sets where spans go. Default: the global provider
// (go.opentelemetry.io/otel.GetTracerProvider) at the time of New.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.tp = tp })
}

// WithMeterProvider sets where metrics go. Default: the global provider
// (go.opentelemetry.io/otel.GetMeterProvider) at the time of New.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.mp = mp })
}

// WithProviderName sets the gen_ai.provider.name of each upstream: f receives an
// upstream's name and returns the provider's well-known name ("openai", "anthropic",
// "gcp.gemini", "azure.ai.openai", "deepseek", ...), or "" to keep the default. f must be
// safe for concurrent use; its answers are cached per upstream. Default: from the
// upstream's adapter once Watch has seen its Client ("openai" for provider/openai, which
// also serves OpenAI-compatible vendors, "anthropic", "gcp.gemini" for provider/gemini,
// else the adapter's package name), and "_OTHER" for an upstream Watch has not seen.
func WithProviderName(f func(upstream string) string) Option {
	return optionFunc(func(c *config) { c.provider = f })
}

// WithErrorMessages sets whether a failed span's status description is the error's whole
// text. An error's text holds the vendor's message, or the start of an error or malformed
// body, which can quote the request's prompt (a 400 or 422 that repeats the offending
// input) or the completion (a 2xx body cut short): opt in only where spans may hold
// prompts and completions. Default false: the description names the failure from what
// holds no text of the call, as "llmclient: bad_request: upstream "a": status 422:
// invalid_value", with the cause when it is one of llmclient's sentinel errors, a context
// error or a network error.
func WithErrorMessages(on bool) Option {
	return optionFunc(func(c *config) { c.errors = on })
}

// WithEstimatedUsage sets whether gen_ai.client.token.usage records token counts that are
// the Client's estimate rather than the upstream's report (llmclient.Event.UsageEstimated:
// an answer or stream without usage, a stream cut or closed before its usage), as the
// GenAI conventions allow only on request. Spans carry such counts either way, marked
// llmclient.usage_estimated. Default false: the metric holds reported usage only.
func WithEstimatedUsage(on bool) Option {
	return optionFunc(func(c *config) { c.estimated = on })
}

// New returns a Telemetry with its instruments created. It fails only when the meter
// refuses an instrument.
func New(opts ...Option) (*Telemetry, error) {
	var cfg config
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if cfg.tp == nil {
		cfg.tp = gotel.GetTracerProvider()
	}
	if cfg.mp == nil {
		cfg.mp = gotel.GetMeterProvider()
	}
	t := &Telemetry{
		tracer:   cfg.tp.Tracer(ScopeName),
		meter:    cfg.mp.Meter(ScopeName),
		provider: cfg.provider,

		errorMessages:  cfg.errors,
		estimatedUsage: cfg.estimated,
	}
	if err := t.m.init(t.meter); err != nil {
		return nil, errors.Join(errors.New("llmclient/otel: creating instruments"), err)
	}
	return t, nil
}

// Observe is the Client's observer (llmclient.WithObserver(t.Observe)): it records the
// metrics of every event and, for a call that Middleware or Transport started, its
// spans. Kinds it does not know are ignored. To log as well, call both observers from
// one function:
//
//	logEvent := slogobserver.New(logger)
//	llmclient.WithObserver(func(ctx context.Context, e llmclient.Event) {
//		tel.Observe(ctx, e)
//		logEvent(ctx, e)
//	})
func (t *Telemetry) Observe(ctx context.Context, e llmclient.Event) {
	t.observe(ctx, &e) // small enough to inline: the event is not copied again
}

// observe is Observe, with the event by pointer.
func (t *Telemetry) observe(ctx context.Context, e *llmclient.Event) {
	c := t.callOf(ctx)
	switch e.Kind {
	case event.Attempt:
		s := t.recordAttempt(ctx, c, e)
		if c != nil {
			c.attempt(e, s)
		}
	case event.Call:
		s := t.recordCall(ctx, c, e)
		if c != nil {
			c.end(e, s)
		}
	case event.Failover, event.Fallback, event.KeyCooldown,
		event.KeyEvicted, event.Alert, event.Hedge, event.Continuation:
		t.recordDecision(ctx, e)
		if c != nil {
			c.decision(e)
		}
	case event.Breaker:
		t.recordDecision(ctx, e)
	case event.CacheHit, event.CacheMiss, event.CacheGuardRejected, event.CacheStored:
		t.recordCache(ctx, e)
	case event.Budget:
		t.recordBudget(ctx, e)
	}
}
