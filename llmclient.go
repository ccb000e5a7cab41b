package llmclient

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/routing"
)

// Client sends chat requests to its upstreams through the protection layers. Create one
// with New and share it: a Client is safe for concurrent use, and its limiters, breakers,
// key pools and retry budget only work when every caller goes through the same Client.
type Client struct {
	cfg       config
	upstreams []*upstream
	byName    map[string]*upstream
	// groups maps each model group to its chain, fallbacks included, and its policy;
	// Client.Update replaces the map. updateMu serializes updates. basePolicy is the
	// policy of the routes of models without a group.
	groups     atomic.Pointer[map[string]*groupRoute]
	basePolicy routePolicy
	updateMu   sync.Mutex
	routes     sync.Map // model -> []*upstream, for models without a group
	routeCount atomic.Int32
	// reroutes are the fallback lists a Decision may continue a call on.
	reroutes [numReroutes][]*upstream
	observer func(context.Context, Event)
	// needStats: some route routes by latency or hedges after an observed delay, so the
	// upstreams keep latency statistics; set in New, or by the first call whose options
	// ask for either.
	needStats atomic.Bool
	needCost  atomic.Bool // some token limit needs each request's estimate; Update may set it
	// partitions limits callers before an upstream is chosen; nil without partition limits.
	partitions *partitionLimiter
	// cost prices calls and enforces budgets; nil without pricing (cost.go).
	cost *costState

	// closed is set by Close; closeOnce runs Close's work once.
	closed    atomic.Bool
	closeOnce sync.Once

	completeChain attemptFunc
	streamChain   attemptFunc
	embedChain    attemptFunc
	handler       Handler
}

// upstream is a registered Upstream with its per-upstream state.
type upstream struct {
	Upstream
	breaker *breaker.Breaker
	// keys is the upstream's key pool and timeout its attempt timeout in nanoseconds;
	// weight is its routing weight. Client.Update replaces them while calls are in flight.
	keys    atomic.Pointer[keyPool]
	timeout atomic.Int64
	weight  atomic.Int64
	// settings is the Upstream as the last Client.Update left it; nil before any.
	settings atomic.Pointer[Upstream]
	budget   *retryBudget
	// slowCall and slowFirstToken are the breaker's thresholds for a slow one-shot call
	// and a slow stream start.
	slowCall, slowFirstToken time.Duration
	// latStats and ttftStats are recent one-shot latencies and stream times to first
	// token, kept when a route routes by latency or hedges after an observed delay.
	latStats, ttftStats latencyStats
	// drained is set while the operator drains the upstream (Client.Drain).
	drained atomic.Bool
	// cutStreak counts the attempts in a row cut by the Client's share of their calls'
	// time, and demotedUntil (unix nanoseconds) is when calls may start here again
	// (serve.go).
	cutStreak    atomic.Int32
	demotedUntil atomic.Int64
	// learned holds the times of the upstream's streams, by model, for the learned
	// first-token and idle limits (learned.go).
	learned learnedTimes
	// shared links the breaker to the store's record; nil unless WithSharedBreakers.
	shared *sharedBreaker
	// ramp paces the upstream's calls after its breaker closed; nil without
	// WithRecoveryRamp.
	ramp *recoveryRamp
	// recent counts the upstream's recent calls for Snapshot.
	recent recentStats
	// price is how the upstream's calls are priced (cost.go).
	price upstreamPrice
}

// pool returns the upstream's current key pool.
func (up *upstream) pool() *keyPool { return up.keys.Load() }

// setTunables sets what Client.Update may change on the hot path: the attempt timeout
// (def when u.Timeout is zero) and the routing weight.
func (up *upstream) setTunables(u Upstream, def time.Duration) {
	t := u.Timeout
	if t == 0 {
		t = def
	}
	up.timeout.Store(int64(t))
	up.weight.Store(int64(u.Weight))
}

// inFlight is the number of the upstream's attempts in flight.
func (up *upstream) inFlight() int32 {
	p := up.pool()
	var n int32
	for _, k := range p.keys {
		n += k.inFlight.Load()
	}
	for _, k := range p.retired {
		n += k.inFlight.Load()
	}
	return n
}

// New returns a Client configured by opts. It validates every option and reports all
// problems in one error; it never panics on bad input.
func New(opts ...Option) (*Client, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.limiter.ratioMemo, cfg.limiter.familySet = new(ratioCache), new(familySet)
	c := &Client{
		cfg:      cfg,
		byName:   make(map[string]*upstream, len(cfg.upstreams)),
		observer: cfg.observer,
	}
	c.needCost.Store(cfg.limiter.enabled(&cfg) || cfg.cost.enabled(&cfg))
	for _, r := range cfg.routing {
		c.needStats.Store(c.needStats.Load() || r == routing.Latency)
	}
	for _, h := range cfg.hedging {
		c.needStats.Store(c.needStats.Load() || needsLatency(h))
	}
	c.basePolicy = cfg.policyFor("")
	c.partitions = newPartitionLimiter(&c.cfg.limiter)
	for _, u := range cfg.upstreams {
		up, err := c.newUpstream(u)
		if err != nil {
			return nil, err
		}
		c.upstreams = append(c.upstreams, up)
		c.byName[u.Name] = up
	}
	c.buildRoutes()
	c.cost = c.newCostState()

	c.completeChain = c.chain(c.callComplete, c.timeoutLayer)
	c.streamChain = c.chain(c.callStream, c.guardLayer)
	c.embedChain = c.chain(c.callEmbed, c.timeoutLayer)
	var h Handler = core{c}
	for i := len(cfg.middleware) - 1; i >= 0; i-- {
		h = cfg.middleware[i](h)
	}
	c.handler = h
	return c, nil
}

// newUpstream builds the per-upstream state of u: its key pool, breaker and retry budget.
func (c *Client) newUpstream(u Upstream) (*upstream, error) {
	cfg := &c.cfg
	up := &upstream{Upstream: u, budget: newRetryBudget(&cfg.retry)}
	up.keys.Store(newKeyPool(u.Name, u.Keys, u.KeySources, u.Limits, &cfg.limiter))
	up.setTunables(u, cfg.attemptTimeout)
	if err := c.newBreaker(up); err != nil {
		return nil, err
	}
	return up, nil
}

// Complete sends req and returns the response, after whatever retries and failovers the
// layers decide. Every error is an *Error carrying the class and the attempt trace.
func (c *Client) Complete(ctx context.Context, req *Request) (*Response, error) {
	if c.closed.Load() {
		return c.complete(ctx, req) // refused, past any middleware (a cache would answer)
	}
	return c.handler.Complete(ctx, req)
}

// Stream sends req as a streaming request. It returns once the stream is committed: the
// first content token has arrived, after whatever retries and failovers were needed
// before it. The caller must Close the Stream.
func (c *Client) Stream(ctx context.Context, req *Request) (*Stream, error) {
	if c.closed.Load() {
		return c.stream(ctx, req) // refused, past any middleware (a cache would answer)
	}
	return c.handler.Stream(ctx, req)
}

// core is the Handler that middleware wraps: the layers themselves.
type core struct{ c *Client }

func (h core) Complete(ctx context.Context, req *Request) (*Response, error) {
	return h.c.complete(ctx, req)
}

func (h core) Stream(ctx context.Context, req *Request) (*Stream, error) {
	return h.c.stream(ctx, req)
}

// Breaker returns the circuit breaker of the named upstream, or nil.
func (c *Client) Breaker(upstream string) *breaker.Breaker {
	if up := c.byName[upstream]; up != nil {
		return up.breaker
	}
	return nil
}

func checkRequest(req *Request) error {
	switch {
	case req == nil:
		return &Error{Class: failure.BadRequest, Message: "nil request"}
	case len(req.Messages) == 0:
		return &Error{Class: failure.BadRequest, Message: "request has no messages"}
	}
	return nil
}

// InFlight reports how many attempts are in flight on the named upstream, across its keys:
// one-shot calls not yet returned and streams not yet ended or closed.
func (c *Client) InFlight(upstream string) int {
	up := c.byName[upstream]
	if up == nil {
		return 0
	}
	return int(up.inFlight())
}

// ErrClosed is wrapped by the error of a call that begins after Client.Close.
var ErrClosed = errors.New("llmclient: the client is closed")

// closeFlushTimeout bounds how long Close waits for the stores it flushes.
const closeFlushTimeout = 5 * time.Second

// flusher is a store that buffers writes (a ledger that queues its settles while its
// backend is away): Close flushes it.
type flusher interface {
	Flush(ctx context.Context) error
}

// Close stops the Client. Every call that begins afterwards — Complete, Stream, Embed, a
// Transport's request — fails at once with failure.Unavailable wrapping ErrClosed, without
// an upstream call. Calls in flight are not interrupted: they finish with their own
// deadlines, retries and failovers, and open Streams read to their end as before (the
// caller still Closes them). Operator controls, Update and Snapshot keep working.
//
// The Client starts no goroutine of its own that outlives a call (key sources refresh on
// the calling goroutine, limiter and breaker timers belong to their calls), so there is
// nothing else to stop. Close then records the breaker trips and resets still pending
// for the Clients that share breakers (WithSharedBreakers) and flushes each store given
// to the Client that buffers writes (the limit store and each budget's ledger, when they
// have a method Flush(context.Context) error), all at once, waiting at most 5 s for them
// (a store whose Flush ignores its context is then left flushing, and reported); their
// errors are returned, joined. It does not close those stores: their owner does, after
// Close. Close is idempotent and safe for concurrent use: later calls return nil at once.
func (c *Client) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		for _, up := range c.upstreams {
			up.shared.flush(up.breaker)
		}
		var stores []namedFlusher
		if f, ok := c.cfg.limiter.store.(flusher); ok {
			stores = append(stores, namedFlusher{"the limit store", f})
		}
		if c.cost != nil {
			for _, br := range c.cost.budgets {
				if f, ok := br.ledger.(flusher); ok {
					stores = append(stores, namedFlusher{"the ledger of budget " + strconv.Quote(br.b.Name), f})
				}
			}
		}
		err = flushAll(stores)
	})
	return err
}

// namedFlusher is a store Close flushes, and what its errors call it.
type namedFlusher struct {
	what string
	f    flusher
}

// flushAll flushes the stores at once and waits for them at most closeFlushTimeout: a
// store whose Flush ignores its context is left flushing, and reported.
func flushAll(stores []namedFlusher) error {
	if len(stores) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeFlushTimeout)
	defer cancel()
	done := make(chan error, len(stores))
	for _, s := range stores {
		go func() {
			if err := s.f.Flush(ctx); err != nil {
				done <- fmt.Errorf("llmclient: flushing %s: %w", s.what, err)
				return
			}
			done <- nil
		}()
	}
	var errs []error
	for pending := len(stores); pending > 0; pending-- {
		select {
		case err := <-done:
			errs = append(errs, err)
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("llmclient: %d of the stores still flushing after %v: %w", pending, closeFlushTimeout, ctx.Err()))
			return errors.Join(errs...)
		}
	}
	return errors.Join(errs...)
}

// closedError is the error of a call that begins after Close.
func closedError(req *Request) *Error {
	e := &Error{Class: failure.Unavailable, Err: ErrClosed, Message: "the client is closed"}
	if req != nil {
		e.Model = req.Model
	}
	return e
}

// checkGroupServed refuses a model group none of whose upstreams serves its name: each
// would be sent a model it does not map, and the group could never fail over.
func (c *config) checkGroupServed(group string, members []string) []error {
	known := false
	for _, n := range members {
		for i := range c.upstreams {
			if u := &c.upstreams[i]; u.Name == n {
				known = true
				if _, ok := u.model(group); ok {
					return nil
				}
			}
		}
	}
	if !known {
		return nil // reported as unknown upstreams
	}
	return []error{fmt.Errorf("model group %q: none of its upstreams serves model %q (give each a Models entry for it)", group, group)}
}

// noRouteError is the error of a call whose route is empty: no upstream serves its model,
// or its CallOptions pinned upstreams that are unknown or not on the route, or excluded
// every one.
func (c *Client) noRouteError(model string, o *CallOptions) *Error {
	e := &Error{Class: failure.NotFound, Model: model, Err: ErrNoUpstream,
		Message: "no upstream serves model " + strconv.Quote(model)}
	if o == nil || len(o.Pin) == 0 && len(o.Exclude) == 0 {
		return e
	}
	var unknown []string
	for _, n := range o.Pin {
		if c.byName[n] == nil {
			unknown = append(unknown, strconv.Quote(n))
		}
	}
	switch {
	case len(unknown) > 0:
		e.Message = "CallOptions.Pin names no upstream of the client: " + strings.Join(unknown, ", ")
	case len(o.Pin) > 0:
		e.Message = "no pinned upstream (CallOptions.Pin) serves model " + strconv.Quote(model)
	default:
		e.Message = "CallOptions.Exclude leaves no upstream serving model " + strconv.Quote(model)
	}
	return e
}
