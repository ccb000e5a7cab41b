package llmclient

import (
	"context"
	"errors"
	"fmt"
	"github.com/llmclient/llmclient/limitstore"
	"math"
	"sync/atomic"
	"time"
)

// Limits bounds the traffic of one API key (each key of an upstream's pool gets its own
// limits; an upstream without a pool is one key). A zero field means no limit on that
// dimension; the zero Limits sets no limit at all.
//
// Requests and tokens are token buckets that refill continuously at RPM/60 and TPM/60 per
// second. A bucket is smaller than a minute's quota, because upstreams also meter shorter
// windows (Azure OpenAI checks its rates over 1 and 10 seconds): by default it holds a
// sixth of the quota, ten seconds' worth (see WithBurstFraction).
type Limits struct {
	// RPM is the requests per minute.
	RPM int
	// TPM is the tokens per minute, prompt and output together. A request is charged its
	// prompt estimate plus its MaxTokens (see WithReservedOutput) before it is sent.
	TPM int
	// MaxConcurrent bounds the requests in flight at once.
	MaxConcurrent int
	// RequestBurst is how many requests may start at once after a quiet spell: the
	// request bucket's size, at most RPM. 0 means RPM times the burst fraction, at least 1.
	RequestBurst int
	// TokenBurst is the token bucket's size, at most TPM. 0 means TPM times the burst
	// fraction, at least 1. A request that costs more than the bucket is admitted when
	// the bucket is full and leaves a debt that later requests wait for.
	TokenBurst int
	// Metering says how the upstream charges tokens, and so how a response's reported
	// usage is reconciled. The zero value is MeterAdmission.
	Metering Metering
}

// Metering is how an upstream counts a request against its tokens-per-minute quota.
type Metering uint8

const (
	// MeterAdmission: the upstream charges its estimate of the prompt plus max tokens when
	// it admits the request and gives nothing back (OpenAI and Azure OpenAI document this).
	// Reconciliation then only charges more when the reported usage exceeds the estimate;
	// it refunds nothing, because the upstream does not either.
	MeterAdmission Metering = iota
	// MeterUsage: the upstream counts the tokens actually used (Anthropic adjusts output
	// tokens to the real count at the end of a request). Reconciliation refunds an
	// over-reservation and charges an overrun.
	MeterUsage
)

func (l Limits) zero() bool { return l.RPM == 0 && l.TPM == 0 && l.MaxConcurrent == 0 }

func (l Limits) validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int
	}{{"RPM", l.RPM}, {"TPM", l.TPM}, {"MaxConcurrent", l.MaxConcurrent},
		{"RequestBurst", l.RequestBurst}, {"TokenBurst", l.TokenBurst}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("limits: negative %s %d", f.name, f.v))
		}
	}
	if l.RequestBurst > 0 && l.RequestBurst > l.RPM {
		errs = append(errs, fmt.Errorf("limits: RequestBurst %d exceeds RPM %d", l.RequestBurst, l.RPM))
	}
	if l.TokenBurst > 0 && l.TokenBurst > l.TPM {
		errs = append(errs, fmt.Errorf("limits: TokenBurst %d exceeds TPM %d", l.TokenBurst, l.TPM))
	}
	if l.Metering > MeterUsage {
		errs = append(errs, fmt.Errorf("limits: unknown Metering %d", l.Metering))
	}
	return errors.Join(errs...)
}

// spec derives the store's view of l.
func (l Limits) spec(c *limiterConfig) limitstore.Spec {
	s := limitstore.Spec{MaxConcurrent: l.MaxConcurrent, BatchShare: c.batchShare}
	if l.RPM > 0 {
		s.Requests = limitstore.Rate{PerSecond: float64(l.RPM) / 60, Burst: c.burst(l.RequestBurst, l.RPM)}
	}
	if l.TPM > 0 {
		s.Tokens = limitstore.Rate{PerSecond: float64(l.TPM) / 60, Burst: c.burst(l.TokenBurst, l.TPM)}
	}
	return s
}

// LimiterMode says what a request does when the limiter cannot admit it at once.
type LimiterMode uint8

const (
	// LimiterWait waits for capacity, as long as the wait fits before the context's
	// deadline and within WithMaxWait; without a deadline or WithMaxWait it waits as long
	// as it takes. A wait that does not fit is not started: the attempt is refused at once
	// with ErrRateLimited (a local refusal, see Decision), and the call moves on to the
	// next upstream or, when none is left, returns.
	LimiterWait LimiterMode = iota
	// LimiterFailFast never waits, with or without a deadline: a request that cannot be
	// admitted at once is refused with ErrRateLimited, so the call moves on to another
	// upstream or returns at once. Keys cooling down after a rate limit are not waited
	// for either.
	LimiterFailFast
)

// Limiter defaults.
const (
	// defaultBurstFraction is the share of a per-minute quota a bucket holds: ten seconds'
	// worth, the longer of the windows Azure OpenAI checks rates over.
	defaultBurstFraction = 1.0 / 6
	// defaultBatchShare is the share of each bucket and of the concurrency slots that
	// PriorityBatch requests may use, keeping the rest for interactive traffic.
	defaultBatchShare = 0.8
)

// limiterConfig is the Client-wide limiter configuration.
type limiterConfig struct {
	estimator      Estimator
	reservedOutput int
	ratios         []tokenRatio
	mode           LimiterMode
	maxWait        time.Duration
	batchShare     float64
	burstFraction  float64
	store          limitstore.Store
	partitions     partitionConfig
}

func defaultLimiterConfig() limiterConfig {
	return limiterConfig{
		reservedOutput: defaultReservedOutput,
		batchShare:     defaultBatchShare,
		burstFraction:  defaultBurstFraction,
	}
}

func (c *limiterConfig) validate() error {
	var errs []error
	if c.reservedOutput <= 0 {
		errs = append(errs, fmt.Errorf("limiter: reserved output must be positive, got %d", c.reservedOutput))
	}
	for _, r := range c.ratios {
		if !(r.ratio >= 0.1 && r.ratio <= 10) {
			errs = append(errs, fmt.Errorf("limiter: token ratio %v for %q is outside [0.1, 10]", r.ratio, r.match))
		}
	}
	if c.mode > LimiterFailFast {
		errs = append(errs, fmt.Errorf("limiter: unknown mode %d", c.mode))
	}
	if c.maxWait < 0 {
		errs = append(errs, errors.New("limiter: negative max wait"))
	}
	if !(c.batchShare > 0 && c.batchShare <= 1) {
		errs = append(errs, fmt.Errorf("limiter: batch share %v is outside (0, 1]", c.batchShare))
	}
	if !(c.burstFraction > 0 && c.burstFraction <= 1) {
		errs = append(errs, fmt.Errorf("limiter: burst fraction %v is outside (0, 1]", c.burstFraction))
	}
	if err := c.partitions.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// enabled reports whether any upstream or partition has a token limit: only then does the
// engine estimate each request's cost.
func (c *limiterConfig) enabled(cfg *config) bool {
	for i := range cfg.upstreams {
		if cfg.upstreams[i].Limits.TPM > 0 {
			return true
		}
	}
	p := &c.partitions
	if p.on && p.limits.TPM > 0 {
		return true
	}
	for _, l := range p.overrides {
		if l.TPM > 0 {
			return true
		}
	}
	return false
}

// burst returns a bucket's size: explicit when set, else quota times the burst fraction.
func (c *limiterConfig) burst(explicit, quota int) float64 {
	if explicit > 0 {
		return float64(explicit)
	}
	return max(1, math.Floor(float64(quota)*c.burstFraction))
}

// open returns a new state for a scope with limits l.
func (c *limiterConfig) open(name string, l Limits) limitstore.State {
	if c.store != nil {
		return c.store.Open(name, l.spec(c))
	}
	return limitstore.NewState(l.spec(c))
}

// WithLimiterMode sets what a request does when the limiter cannot admit it at once.
// Default LimiterWait.
func WithLimiterMode(m LimiterMode) Option {
	return optionFunc(func(c *config) { c.limiter.mode = m })
}

// WithMaxWait bounds how long a request waits in each limiter (a key's, a partition's),
// on top of the context's deadline; a longer wait fails at once with ErrRateLimited.
// Default 0: only the deadline bounds the wait.
func WithMaxWait(d time.Duration) Option {
	return optionFunc(func(c *config) { c.limiter.maxWait = d })
}

// WithBatchShare sets the share, in (0, 1], of each bucket's rate and size and of the
// concurrency slots that PriorityBatch requests may use; the rest stays free for
// interactive requests. Default 0.8; 1 puts batch on equal terms.
func WithBatchShare(f float64) Option {
	return optionFunc(func(c *config) { c.limiter.batchShare = f })
}

// WithBurstFraction sets the share, in (0, 1], of a per-minute quota that a bucket holds
// when Limits.RequestBurst or Limits.TokenBurst is 0. Default 1/6.
func WithBurstFraction(f float64) Option {
	return optionFunc(func(c *config) { c.limiter.burstFraction = f })
}

// WithLimitStore sets where the limiter keeps its state. Default: in memory, private to
// the Client (limitstore.NewMemory).
func WithLimitStore(s limitstore.Store) Option {
	return optionFunc(func(c *config) { c.limiter.store = s })
}

// keyLimiter enforces one scope's Limits. A nil *keyLimiter limits nothing. It is safe
// for concurrent use.
type keyLimiter struct {
	state    limitstore.State
	mode     LimiterMode
	maxWait  time.Duration // 0: no bound but the deadline
	metering Metering
	slots    bool // MaxConcurrent is set
	gate     bool // batch traffic passes the batch lane first
	inFlight atomic.Int64
	// reqBurst and tokBurst are the bucket sizes, to compare the upstream's reports with.
	reqBurst, tokBurst float64
	adapt              adaptation
}

// newKeyLimiter returns a private limiter for l, or nil when l limits nothing.
func newKeyLimiter(l Limits, cfg *limiterConfig) *keyLimiter {
	return newNamedKeyLimiter("", l, cfg)
}

// newNamedKeyLimiter returns a limiter for l whose state is the store's scope name ("" for
// a private one), or nil when l limits nothing.
func newNamedKeyLimiter(name string, l Limits, cfg *limiterConfig) *keyLimiter {
	if l.zero() {
		return nil
	}
	spec := l.spec(cfg)
	return &keyLimiter{
		state:    cfg.open(name, l),
		mode:     cfg.mode,
		maxWait:  cfg.maxWait,
		metering: l.Metering,
		slots:    l.MaxConcurrent > 0,
		gate:     cfg.batchShare < 1 && (l.RPM > 0 || l.TPM > 0),
		reqBurst: spec.Requests.Burst,
		tokBurst: spec.Tokens.Burst,
	}
}

// limitLease is what an admitted request holds until its attempt is settled. The zero
// lease holds nothing.
type limitLease struct {
	l     *keyLimiter
	cost  int
	slot  limitstore.SlotLease
	held  bool // a concurrency slot is held
	batch bool // the batch lane was charged too
}

// acquire admits a request of the given token cost: a concurrency slot first, then, for
// batch requests, the batch lane, then the request and token buckets, waiting in arrival
// order. It returns how long it waited. When the wait would not fit (fail-fast mode,
// WithMaxWait, the context's deadline) it returns at once, without sleeping, an *Error of
// ClassRateLimited wrapping ErrRateLimited whose message names the wait that did not fit.
// A canceled context's error is returned as is; nothing stays charged either way.
func (l *keyLimiter) acquire(ctx context.Context, cost int, prio Priority) (limitLease, time.Duration, error) {
	return l.acquireOr(ctx, cost, prio, false, -1)
}

// acquireOr is acquire; with switchable, a key paused in the store (a 429 seen by another
// replica) fails at once with a *keyPausedError instead of waiting, so the caller can move
// to another key of the pool.
//
// within caps the whole wait on top of the mode, WithMaxWait and the deadline (negative:
// no cap of its own): the wait threshold when the call has somewhere else to go.
func (l *keyLimiter) acquireOr(ctx context.Context, cost int, prio Priority, switchable bool, within time.Duration) (limitLease, time.Duration, error) {
	if l == nil {
		return limitLease{}, 0, nil
	}
	ls := limitLease{l: l, cost: max(cost, 0)}
	var waited time.Duration
	if l.slots {
		lim, err := l.limit(ctx, 0, within)
		if err != nil {
			return limitLease{}, 0, err
		}
		lease, w, err := l.state.AcquireSlot(ctx, prio == PriorityBatch, lim)
		waited += w
		if err != nil {
			return limitLease{}, waited, l.asError(err, 0)
		}
		ls.slot, ls.held = lease, true
	}
	if prio == PriorityBatch && l.gate {
		w, err := l.reserve(ctx, limitstore.LaneBatch, ls.cost, waited, false, within)
		if err != nil {
			ls.undo(false)
			return limitLease{}, waited, err
		}
		ls.batch = true
		waited += w
	}
	w, err := l.reserve(ctx, limitstore.LaneMain, ls.cost, waited, switchable, within)
	if err != nil {
		ls.undo(false)
		return limitLease{}, waited, err
	}
	waited += w
	if w > 0 {
		// A 429 may have paused the scope while this request slept.
		for {
			left, err := l.state.PauseLeft(ctx)
			if err != nil || left <= 0 {
				break
			}
			if lim, err := l.limit(ctx, waited, within); err != nil || (lim >= 0 && left > lim) {
				ls.undo(true)
				if err == nil {
					err = l.rateLimited(left)
				}
				return limitLease{}, waited, err
			}
			if err := sleep(ctx, left); err != nil {
				ls.undo(true)
				return limitLease{}, waited + left, err
			}
			waited += left
		}
	}
	l.inFlight.Add(1)
	return ls, waited, nil
}

// reserve takes the cost from a lane's buckets and sleeps until the reservation's time.
// On failure nothing stays charged on that lane.
func (l *keyLimiter) reserve(ctx context.Context, lane limitstore.Lane, cost int, waited time.Duration, switchable bool, within time.Duration) (time.Duration, error) {
	lim, err := l.limit(ctx, waited, within)
	if err != nil {
		return 0, err
	}
	w, ok, err := l.state.Reserve(ctx, limitstore.Reservation{Lane: lane, Requests: 1, Tokens: cost, MaxWait: lim})
	if err != nil {
		return 0, l.asError(err, 0)
	}
	if !ok {
		return 0, l.rateLimited(w)
	}
	if w > 0 && switchable {
		// A wait may come from a pause that a 429 seen elsewhere (another replica sharing
		// the store) put on the key: then another key is better than waiting.
		if left, err := l.state.PauseLeft(ctx); err == nil && left > 0 {
			_ = l.state.Adjust(context.WithoutCancel(ctx), lane, -1, -cost)
			return 0, &keyPausedError{left: left}
		}
	}
	if err := sleepFor(ctx, w); err != nil {
		_ = l.state.Adjust(context.WithoutCancel(ctx), lane, -1, -cost)
		return 0, err
	}
	return w, nil
}

// limit returns the longest wait the request may still accept (negative: no bound), or
// the context's error when it is already done.
func (l *keyLimiter) limit(ctx context.Context, waited, within time.Duration) (time.Duration, error) {
	lim, err := waitLimit(ctx, l.mode, l.maxWait, waited)
	if within >= 0 && (lim < 0 || lim > within-waited) {
		lim = max(within-waited, 0)
	}
	return lim, err
}

// waitLimit is the longest wait a request that has waited so far may still accept in the
// Client's waiting layers (a cooling key's, a limiter's), negative for no bound: 0 in
// fail-fast mode, else what WithMaxWait and the context's deadline leave. It returns the
// context's error when it is already done.
func (c *limiterConfig) waitLimit(ctx context.Context, waited, within time.Duration) (time.Duration, error) {
	lim, err := waitLimit(ctx, c.mode, c.maxWait, waited)
	if within >= 0 && (lim < 0 || lim > within-waited) {
		lim = max(within-waited, 0)
	}
	return lim, err
}

func waitLimit(ctx context.Context, mode LimiterMode, maxWait, waited time.Duration) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if mode == LimiterFailFast {
		return 0, nil
	}
	lim := time.Duration(-1)
	if maxWait > 0 {
		lim = max(maxWait-waited, 0)
	}
	if dl, ok := ctx.Deadline(); ok {
		// A wait that ends at the deadline leaves no time for the call itself.
		left := max(time.Until(dl)-1, 0)
		if lim < 0 || left < lim {
			lim = left
		}
	}
	return lim, nil
}

// keyPausedError says the key is paused in the store for left: the key layer moves to
// another key of the pool, or waits.
type keyPausedError struct{ left time.Duration }

func (e *keyPausedError) Error() string { return "llmclient: key paused after a rate limit" }
func (e *keyPausedError) Unwrap() error { return ErrRateLimited }

func (l *keyLimiter) rateLimited(wait time.Duration) *Error {
	msg := "the limiter cannot admit the request in time"
	if wait > 0 {
		msg += " (it would wait " + wait.Round(time.Millisecond).String() + ")"
	}
	return &Error{Class: ClassRateLimited, Err: ErrRateLimited, Message: msg, AdmitAfter: max(wait, 0)}
}

// asError turns a store's error into the limiter's: context errors as they are, a
// refusal into a rate-limited *Error.
func (l *keyLimiter) asError(err error, wait time.Duration) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	e := l.rateLimited(wait)
	e.Err = fmt.Errorf("%w: %w", ErrRateLimited, err) // keep the store's own error in the chain
	if !errors.Is(err, limitstore.ErrRefused) {
		e.Message = "the limiter's store failed"
	}
	return e
}

// undo gives back what a failed acquire took: the batch lane's charge, the main lane's
// when main is true, and the slot.
func (ls *limitLease) undo(main bool) {
	l, bg := ls.l, context.Background()
	if ls.batch {
		_ = l.state.Adjust(bg, limitstore.LaneBatch, -1, -ls.cost)
	}
	if main {
		_ = l.state.Adjust(bg, limitstore.LaneMain, -1, -ls.cost)
	}
	if ls.held {
		l.state.ReleaseSlot(ls.slot)
	}
}

// release settles the lease once the attempt's outcome is known. used is false when the
// attempt failed or was canceled before the upstream counted it: its request and tokens
// are given back. Otherwise actualTokens, the usage the upstream reported (prompt plus
// output; 0 when unknown), is reconciled with the estimate according to the key's
// Metering. The concurrency slot is always released. It must be called exactly once.
func (ls limitLease) release(actualTokens int, used bool) {
	l := ls.l
	if l == nil {
		return
	}
	bg := context.Background()
	delta, requests := 0, 0
	switch {
	case !used:
		delta, requests = -ls.cost, -1
	case actualTokens > 0:
		delta = actualTokens - ls.cost
		if l.metering == MeterAdmission {
			delta = max(delta, 0)
		}
	}
	if delta != 0 || requests != 0 {
		_ = l.state.Adjust(bg, limitstore.LaneMain, requests, delta)
		if ls.batch {
			_ = l.state.Adjust(bg, limitstore.LaneBatch, requests, delta)
		}
	}
	// Count the request out before its slot goes to a waiter, so InFlight never overstates.
	l.inFlight.Add(-1)
	if ls.held {
		l.state.ReleaseSlot(ls.slot)
	}
}

// observe pulls the buckets down to the quota the upstream reported in its headers, and
// adapts a private state's rates to it (limiter_adapt.go), so processes that share a key
// slow down together. Token windows: the combined one, else the input-token one
// (Anthropic reports both).
func (l *keyLimiter) observe(rl *RateLimits) {
	if l == nil || rl == nil {
		return
	}
	requests, tokens := int64(-1), int64(-1)
	if rl.Requests.Known {
		requests = rl.Requests.Remaining
	}
	switch {
	case rl.Tokens.Known:
		tokens = rl.Tokens.Remaining
	case rl.InputTokens.Known:
		tokens = rl.InputTokens.Remaining
	}
	if requests < 0 && tokens < 0 {
		return
	}
	_ = l.state.Sync(context.Background(), requests, tokens)
	if sc, ok := l.state.(rateScaler); ok {
		if f, changed := l.adapt.next(time.Now(), requests, tokens, l.reqBurst, l.tokBurst); changed {
			sc.ScaleRates(f)
		}
	}
}

// pause stops admission on the scope until the given time, for every caller.
func (l *keyLimiter) pause(until time.Time) {
	if l == nil {
		return
	}
	if d := time.Until(until); d > 0 {
		_ = l.state.Pause(context.Background(), d)
	}
}

// InFlight returns the number of admitted requests whose lease is not yet released.
func (l *keyLimiter) InFlight() int {
	if l == nil {
		return 0
	}
	return int(l.inFlight.Load())
}
