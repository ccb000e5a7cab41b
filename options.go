package llmclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/routing"
)

// Option configures a Client. Options are applied in order and the last one of a kind wins;
// no option reads another. Derived values are computed and validated in New.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// FallbackFunc produces a last-resort response when every upstream failed, for example a
// canned or cached reply. It receives the error that would otherwise be returned. A nil
// Response with a nil error is treated as "no fallback".
type FallbackFunc func(ctx context.Context, req *Request, err error) (*Response, error)

// config is everything New validates. Each layer owns its sub-config in its own file.
type config struct {
	upstreams       []Upstream
	groups          map[string][]string
	dupGroups       []string // groups WithModelGroup named more than once
	groupFallbacks  map[string][]string
	contextFallback []string
	contentFallback []string
	fallback        FallbackFunc
	decisions       decisionTable
	observer        func(context.Context, Event)
	middleware      []Middleware
	attemptTimeout  time.Duration
	// callBudget bounds calls whose context has no deadline (WithCallBudget).
	callBudget time.Duration
	// learnFirstToken: WithFirstTokenTimeout is not set, so each stream's first-token
	// limit is learned per upstream and model (learned.go).
	learnFirstToken bool
	// waitThreshold is, per Priority, the longest wait a call accepts on an upstream
	// while another one of its route could serve it.
	waitThreshold [numPriorities]time.Duration
	retry         retryConfig
	breaker       breaker.Config
	limiter       limiterConfig
	stream        streamConfig
	keys          keyConfig
	badPriority   bool
	routing       map[string]routing.Policy
	hedging       map[string]routing.Hedge
	cost          costConfig
	recoveryRamp  time.Duration
	// sharedBreakers is set by WithSharedBreakers, for the named upstreams (all when
	// none is named).
	sharedBreakers     bool
	sharedBreakerNames []string
	// caches are the cache statistics Snapshot reports (WithCacheStats).
	caches []cacheStats
	// affinity is WithCacheAffinity's prefix in bytes; 0: off.
	affinity int
}

func defaultConfig() config {
	return config{
		decisions:       defaultDecisionTable(),
		attemptTimeout:  defaultAttemptTimeout,
		callBudget:      defaultCallBudget,
		learnFirstToken: true,
		waitThreshold:   [numPriorities]time.Duration{defaultWaitThreshold, defaultWaitThreshold},
		retry:           defaultRetryConfig(),
		breaker:         breaker.DefaultConfig(),
		limiter:         defaultLimiterConfig(),
		stream:          defaultStreamConfig(),
		keys:            defaultKeyConfig(),
	}
}

// defaultAttemptTimeout is the default bound on one one-shot attempt: none of the Client's
// own. A one-shot attempt is already bounded by the caller's context and by the adapter's
// HTTP client: the default one waits at most 10 minutes for response headers, and a
// one-shot response's headers come only once the whole generation is done. Setting a
// bound costs a timer and a context per attempt.
const defaultAttemptTimeout time.Duration = 0

// defaultWaitThreshold is the longest wait on one upstream while another could serve.
const defaultWaitThreshold = 2 * time.Second

// WithUpstream registers an upstream. Upstreams serve requests in registration order unless
// WithModelGroup or WithRouting says otherwise. At least one upstream is required; names
// must be unique and non-empty. The Client keeps u's slices and maps (Keys, Models): do
// not change them after New.
func WithUpstream(u Upstream) Option {
	return optionFunc(func(c *config) { c.upstreams = append(c.upstreams, u) })
}

// WithFallback sets the final fallback function, called when every upstream failed with a
// class that allows failover and the caller's context is not done. It receives the call's
// context, deadline included: it must respect it. Its response is marked Degraded.
// Default: none.
func WithFallback(f FallbackFunc) Option {
	return optionFunc(func(c *config) { c.fallback = f })
}

// WithDecision overrides the decision for one class. Start from DefaultDecision(class) to
// change a single field. Every wait a decision leads to still ends before the context's
// deadline; without a deadline the caps (WithMaxAttempts, WithMaxRetryAfter) bound it.
// Default: DefaultDecision for every class.
func WithDecision(class failure.Class, d Decision) Option {
	return optionFunc(func(c *config) {
		if class < numClasses {
			c.decisions[class] = d
		}
	})
}

// WithObserver sets the function that receives every Event: attempts, failovers, breaker
// state changes, key cooldowns and evictions, alerts. For the events of a call it gets the
// caller's context (for tracing and request-scoped values; it may be done already) and the
// event carries the call's ID, metadata and partition; other events get
// context.Background. It is called synchronously, after the Client's own state is settled
// and never with a lock held, on the caller's goroutine or, for a stream's timeouts and
// a dropped stream, on a timer's; it must be safe for concurrent use and should return
// quickly. A panic in it propagates to that goroutine (the Client's state is already
// consistent). Default: none. Package slogobserver adapts a *slog.Logger; package
// otel (a module of its own) emits OpenTelemetry traces and metrics. Each WithObserver
// adds an observer: every one receives every event, in the order they were given (a nil
// f adds none).
func WithObserver(f func(ctx context.Context, e Event)) Option {
	return optionFunc(func(c *config) {
		if prev := c.observer; prev != nil && f != nil {
			c.observer = func(ctx context.Context, e Event) { prev(ctx, e); f(ctx, e) }
		} else if f != nil {
			c.observer = f
		}
	})
}

// WithMiddleware adds a middleware around Complete and Stream. The first one added is the
// outermost. Middleware sees the caller's request and context (deadline included) before
// any layer, and the final result; it is called concurrently and must be safe for that.
// Default: none.
func WithMiddleware(m Middleware) Option {
	return optionFunc(func(c *config) { c.middleware = append(c.middleware, m) })
}

// WithAttemptTimeout bounds each one-shot attempt (streams are bounded by the stream guard's
// timeouts instead); an attempt that runs out fails with failure.Timeout and ErrAttemptTimeout
// and fails over at once, or is retried on the route's last upstream. An Upstream's own
// Timeout and CallOptions.AttemptTimeout take precedence. With a context deadline and
// another upstream to go to, an attempt also gets at most half of the time left, whatever
// this bound. d must not be negative. Default 0: no bound of the Client's own; without a
// deadline a one-shot attempt is then bounded by the adapters' HTTP response-header
// timeout (10 minutes in the built-in adapters) and a transport attempt by 10 minutes.
func WithAttemptTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.attemptTimeout = d })
}

// validate checks the configuration and reports every problem at once.
func (c *config) validate() error {
	var errs []error
	if len(c.upstreams) == 0 {
		errs = append(errs, errors.New("no upstream: add one with WithUpstream"))
	}
	names := make(map[string]bool, len(c.upstreams))
	for i, u := range c.upstreams {
		switch {
		case u.Name == "":
			errs = append(errs, fmt.Errorf("upstream %d has no Name", i))
		case names[u.Name]:
			errs = append(errs, fmt.Errorf("upstream %q registered twice", u.Name))
		}
		names[u.Name] = true
		if u.Provider == nil {
			errs = append(errs, fmt.Errorf("upstream %q has no Provider", u.Name))
		}
		errs = append(errs, u.validateTunables()...)
	}
	checkNames := func(what string, list []string) {
		for _, n := range list {
			if !names[n] {
				errs = append(errs, fmt.Errorf("%s names unknown upstream %q", what, n))
			}
		}
	}
	for _, g := range c.dupGroups {
		errs = append(errs, fmt.Errorf("model group %q is declared more than once", g))
	}
	for g, list := range c.groups {
		if len(list) == 0 {
			errs = append(errs, fmt.Errorf("model group %q is empty", g))
		}
		checkNames(fmt.Sprintf("model group %q", g), list)
		errs = append(errs, c.checkGroupServed(g, list)...)
	}
	for g, fbs := range c.groupFallbacks {
		if _, ok := c.groups[g]; !ok {
			errs = append(errs, fmt.Errorf("group fallback for unknown model group %q", g))
		}
		for _, fb := range fbs {
			if _, ok := c.groups[fb]; !ok {
				errs = append(errs, fmt.Errorf("group %q falls back to unknown model group %q", g, fb))
			}
		}
	}
	checkNames("WithContextFallback", c.contextFallback)
	checkNames("WithContentFallback", c.contentFallback)
	if c.callBudget < 0 || c.callBudget > maxCallBudget {
		errs = append(errs, fmt.Errorf("WithCallBudget(%v): outside [0, %v]", c.callBudget, maxCallBudget))
	}
	if c.attemptTimeout < 0 {
		errs = append(errs, errors.New("negative attempt timeout"))
	}
	if c.recoveryRamp < 0 || c.recoveryRamp > maxRecoveryRamp {
		errs = append(errs, fmt.Errorf("WithRecoveryRamp(%v): outside [0, %v]", c.recoveryRamp, maxRecoveryRamp))
	}
	for p, d := range c.waitThreshold {
		if d < 0 {
			errs = append(errs, fmt.Errorf("negative wait threshold %v for priority %d", d, p))
		}
	}
	if c.badPriority {
		errs = append(errs, errors.New("WithWaitThreshold: unknown priority"))
	}
	errs = append(errs, c.validateRouting()...)
	errs = append(errs, c.validateAffinity()...)
	errs = append(errs, c.validateSharedBreakers()...)
	errs = append(errs, c.validateCost()...)
	errs = append(errs, c.validateCaches()...)
	errs = append(errs, c.validateQuota()...)
	for _, sub := range []interface{ validate() error }{&c.retry, &c.limiter, &c.stream, &c.keys} {
		if err := sub.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.breaker.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("llmclient: invalid options: %w", errors.Join(errs...))
}

// WithBreaker sets the circuit breaker configuration used for every upstream (each has its
// own breaker). Zero fields take their defaults. Its OnStateChange, if set, is called for
// every upstream's breaker, after the observer's event.Breaker. The breaker's timers run on
// the clock, not on callers' deadlines. Default breaker.DefaultConfig().
func WithBreaker(cfg breaker.Config) Option {
	return optionFunc(func(c *config) { c.breaker = cfg })
}

// validateTunables checks what Client.Update may change on an upstream: its keys and key
// sources, limits, timeout and weight.
func (u *Upstream) validateTunables() []error {
	var errs []error
	if u.Timeout < 0 {
		errs = append(errs, fmt.Errorf("upstream %q: negative Timeout", u.Name))
	}
	if u.Weight < 0 {
		errs = append(errs, fmt.Errorf("upstream %q: negative Weight %d", u.Name, u.Weight))
	}
	for j, k := range u.Keys {
		if k == "" {
			errs = append(errs, fmt.Errorf("upstream %q: key#%d is empty", u.Name, j+1))
		}
	}
	for j, src := range u.KeySources {
		if src == nil {
			errs = append(errs, fmt.Errorf("upstream %q: key source %d is nil", u.Name, j+1))
		}
	}
	if err := u.Limits.validate(); err != nil {
		errs = append(errs, fmt.Errorf("upstream %q: %w", u.Name, err))
	}
	return errs
}
