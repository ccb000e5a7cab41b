// Package breaker is the circuit breaker llmclient gives each upstream: a sliding window
// of outcomes that trips on a failure ratio over a minimum volume, on a run of failures,
// or on a ratio of slow calls, stays open for a while that grows with repeated trips, and admits a few
// half-open probes. Its defaults are made for LLM upstreams, whose 10–20% transient error
// rates are noise, not outages. A Client builds one per upstream from
// llmclient.WithBreaker's Config; the package is exported for callers who want the same
// breaker around other calls, and for Client.Breaker's result.
package breaker

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// ErrOpen is returned by Allow when the breaker is open or its half-open probes are
// taken. llmclient.ErrCircuitOpen is the same error.
var ErrOpen = errors.New("llmclient: circuit breaker open")

// State is the state of a circuit breaker.
type State uint8

// The breaker states.
const (
	// Closed: requests flow and their outcomes are counted.
	Closed State = iota
	// Open: requests are refused with ErrOpen until the open time has passed.
	Open
	// HalfOpen: a few probe requests test whether the upstream has recovered.
	HalfOpen
)

// String returns "closed", "open" or "half-open".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return "unknown"
}

// Outcome is what a permitted request reports back to the breaker.
type Outcome uint8

// The outcomes.
const (
	// Success: the upstream worked.
	Success Outcome = iota
	// Failure: the upstream failed in a way that counts against its health
	// (overloaded, server error, timeout, network, broken stream).
	Failure
	// Ignore: the result says nothing about the upstream's health (a 429, a bad
	// request, a canceled context). It counts neither way, but frees a half-open probe slot.
	Ignore
	// Slow: the upstream answered, but slower than the caller's threshold (Config.SlowCall,
	// SlowFirstToken), or was cut short after running longer than it (llmclient reports a
	// hedged call's losing attempt so). It counts as a success for the failure rules and as slow for the
	// slow-call ratio; a slow half-open probe counts as a failed one.
	Slow
)

// String returns "success", "failure", "ignore" or "slow".
func (o Outcome) String() string {
	switch o {
	case Success:
		return "success"
	case Failure:
		return "failure"
	case Ignore:
		return "ignore"
	case Slow:
		return "slow"
	}
	return "unknown"
}

// Defaults of Config. They are meant to detect outages, not noise: LLM upstreams
// routinely fail 10–20% of requests with transient errors, and retries absorb those. With a
// 20% (and even 25%) independent failure rate, a simulated 10 million requests at any
// traffic volume tripped these defaults at most twice; "10 failures in the last 20" trips
// every few thousand requests at that rate.
const (
	// DefaultWindow is the span of recent outcomes the failure ratio looks at.
	DefaultWindow = 60 * time.Second
	// DefaultBuckets is how many slices the window is kept in.
	DefaultBuckets = 10
	// DefaultMinRequests is the volume the window needs before the ratio can trip:
	// below it, small samples are too noisy to judge.
	DefaultMinRequests = 50
	// DefaultFailureRatio trips the breaker when at least half the counted requests
	// in the window failed.
	DefaultFailureRatio = 0.5
	// DefaultConsecutiveFailures trips the breaker on a run of failures whatever the
	// volume; it catches hard outages on quiet upstreams. At a 20% failure rate such a run
	// happens about once in 10 million requests.
	DefaultConsecutiveFailures = 10
	// DefaultOpenTimeout is how long the breaker stays open after tripping.
	DefaultOpenTimeout = 15 * time.Second
	// DefaultMaxOpenTimeout caps the open time, which doubles on every failed probe.
	DefaultMaxOpenTimeout = 5 * time.Minute
	// DefaultHalfOpenProbes is how many probes may be in flight while half-open.
	DefaultHalfOpenProbes = 3
	// DefaultSlowCallRatio trips the breaker when at least 80% of the counted requests in
	// the window (MinRequests at least) were slow.
	DefaultSlowCallRatio = 0.8
	// DefaultSlowCall is the one-shot latency above which llmclient reports a call as
	// slow: long enough for a long answer of a reasoning model, so that only an upstream
	// that crawls trips the breaker.
	DefaultSlowCall = 5 * time.Minute
	// DefaultSlowFirstToken is the time to a stream's first token above which llmclient
	// reports a stream as slow; streams of chat models start within seconds.
	DefaultSlowFirstToken = time.Minute
)

// maxBuckets bounds a breaker's memory.
const maxBuckets = 1000

// Config configures a circuit breaker. A zero field takes its default (see the
// DefaultBreaker constants), so the zero Config is the default configuration;
// negative values are invalid. DefaultConfig returns the defaults filled in.
//
// The breaker trips (closed to open) when, among the outcomes of about the last Window,
// there are at least MinRequests and failures/total ≥ FailureRatio or slow/total ≥
// SlowCallRatio, or when ConsecutiveFailures failures arrive in a row. It stays open for OpenTimeout, then admits
// up to HalfOpenProbes concurrent probes; SuccessesToClose probe successes close it, one
// probe failure opens it again for twice the previous open time, up to MaxOpenTimeout.
// Closing resets the window and the open time.
type Config struct {
	// Window is the span of recent outcomes the ratio rule looks at; it is kept in Buckets
	// slices and slides one slice at a time, so it covers between Window-Window/Buckets and
	// Window. Default DefaultWindow (60s).
	Window time.Duration
	// Buckets is how many slices Window is kept in, at most 1000; each slice must span at
	// least a millisecond. Default DefaultBuckets (10).
	Buckets int
	// MinRequests is how many counted outcomes the window needs before FailureRatio
	// applies. Default DefaultMinRequests (50).
	MinRequests int
	// FailureRatio, in (0, 1], is the share of failures in the window that trips the
	// breaker. Default DefaultFailureRatio (0.5).
	FailureRatio float64
	// ConsecutiveFailures is the run of failures that trips the breaker whatever the
	// volume. Ignored outcomes neither extend nor break a run. Default
	// DefaultConsecutiveFailures (10).
	ConsecutiveFailures int
	// OpenTimeout is how long the breaker stays open after tripping from closed. Default
	// DefaultOpenTimeout (15s).
	OpenTimeout time.Duration
	// MaxOpenTimeout caps the open time, which doubles on every failed half-open probe.
	// It must not be below OpenTimeout. Default DefaultMaxOpenTimeout (5m), or
	// OpenTimeout when that is longer.
	MaxOpenTimeout time.Duration
	// HalfOpenProbes is how many probes may be in flight at once while half-open. Default
	// DefaultHalfOpenProbes (3).
	HalfOpenProbes int
	// SuccessesToClose is how many probe successes close the breaker; when larger than
	// HalfOpenProbes, probes are admitted in further rounds as earlier ones finish.
	// Default HalfOpenProbes.
	SuccessesToClose int
	// SlowCallRatio, in (0, 1], is the share of slow outcomes in the window (MinRequests
	// at least) that trips the breaker, separately from FailureRatio. Default
	// DefaultSlowCallRatio (0.8). The rule "P95 latency above 10 s over 30 s" is Window
	// 30s, SlowCall 10s, SlowCallRatio 0.05.
	SlowCallRatio float64
	// SlowCall and SlowFirstToken are the thresholds above which llmclient reports an
	// upstream's successful call as Slow: the latency of a one-shot call, the time to the
	// first token of a stream. The breaker itself does not time calls; other users report
	// Slow themselves. To leave slowness out, set them above the attempt timeouts.
	// Defaults DefaultSlowCall (5m) and DefaultSlowFirstToken (1m).
	SlowCall, SlowFirstToken time.Duration
	// OnStateChange, if set, is called on every state change, in order, never with the
	// breaker's lock held: it may call the breaker's methods. It runs on the goroutine of
	// a caller of Allow, Done or State (not necessarily the one that caused the change) and
	// should return quickly. Default: none.
	OnStateChange func(from, to State)
}

// DefaultConfig returns the default configuration with every field filled in, a
// starting point for changing a single field.
func DefaultConfig() Config {
	return Config{
		Window:              DefaultWindow,
		Buckets:             DefaultBuckets,
		MinRequests:         DefaultMinRequests,
		FailureRatio:        DefaultFailureRatio,
		ConsecutiveFailures: DefaultConsecutiveFailures,
		OpenTimeout:         DefaultOpenTimeout,
		MaxOpenTimeout:      DefaultMaxOpenTimeout,
		HalfOpenProbes:      DefaultHalfOpenProbes,
		SuccessesToClose:    DefaultHalfOpenProbes,
		SlowCallRatio:       DefaultSlowCallRatio,
		SlowCall:            DefaultSlowCall,
		SlowFirstToken:      DefaultSlowFirstToken,
	}
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.Buckets == 0 {
		c.Buckets = DefaultBuckets
	}
	if c.MinRequests == 0 {
		c.MinRequests = DefaultMinRequests
	}
	if c.FailureRatio == 0 {
		c.FailureRatio = DefaultFailureRatio
	}
	if c.ConsecutiveFailures == 0 {
		c.ConsecutiveFailures = DefaultConsecutiveFailures
	}
	if c.OpenTimeout == 0 {
		c.OpenTimeout = DefaultOpenTimeout
	}
	if c.MaxOpenTimeout == 0 {
		c.MaxOpenTimeout = max(DefaultMaxOpenTimeout, c.OpenTimeout)
	}
	if c.HalfOpenProbes == 0 {
		c.HalfOpenProbes = DefaultHalfOpenProbes
	}
	if c.SuccessesToClose == 0 {
		c.SuccessesToClose = c.HalfOpenProbes
	}
	if c.SlowCallRatio == 0 {
		c.SlowCallRatio = DefaultSlowCallRatio
	}
	if c.SlowCall == 0 {
		c.SlowCall = DefaultSlowCall
	}
	if c.SlowFirstToken == 0 {
		c.SlowFirstToken = DefaultSlowFirstToken
	}
	return c
}

// Validate reports every problem of the configuration at once, as New does. It does not
// change c.
func (c *Config) Validate() error { return c.validate() }

func (c *Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("breaker: "+format, args...))
	}
	if c.Window < 0 {
		bad("Window %v is negative", c.Window)
	}
	if c.Buckets < 0 || c.Buckets > maxBuckets {
		bad("Buckets %d is outside [1, %d] (0 takes the default)", c.Buckets, maxBuckets)
	}
	if c.MinRequests < 0 {
		bad("MinRequests %d is negative", c.MinRequests)
	}
	if math.IsNaN(c.FailureRatio) || c.FailureRatio < 0 || c.FailureRatio > 1 {
		bad("FailureRatio %v is outside (0, 1]", c.FailureRatio)
	}
	if c.ConsecutiveFailures < 0 {
		bad("ConsecutiveFailures %d is negative", c.ConsecutiveFailures)
	}
	if c.OpenTimeout < 0 {
		bad("OpenTimeout %v is negative", c.OpenTimeout)
	}
	if c.MaxOpenTimeout < 0 {
		bad("MaxOpenTimeout %v is negative", c.MaxOpenTimeout)
	}
	if c.HalfOpenProbes < 0 {
		bad("HalfOpenProbes %d is negative", c.HalfOpenProbes)
	}
	if c.SuccessesToClose < 0 {
		bad("SuccessesToClose %d is negative", c.SuccessesToClose)
	}
	if math.IsNaN(c.SlowCallRatio) || c.SlowCallRatio < 0 || c.SlowCallRatio > 1 {
		bad("SlowCallRatio %v is outside (0, 1]", c.SlowCallRatio)
	}
	if c.SlowCall < 0 || c.SlowFirstToken < 0 {
		bad("SlowCall %v or SlowFirstToken %v is negative", c.SlowCall, c.SlowFirstToken)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// Relations between fields, judged with the defaults filled in.
	d := c.withDefaults()
	if d.Window/time.Duration(d.Buckets) < time.Millisecond {
		bad("Window %v split into %d Buckets gives slices under 1ms", d.Window, d.Buckets)
	}
	if d.MaxOpenTimeout < d.OpenTimeout {
		bad("MaxOpenTimeout %v is below OpenTimeout %v", d.MaxOpenTimeout, d.OpenTimeout)
	}
	return errors.Join(errs...)
}

// Breaker is a circuit breaker for one upstream. Each request asks Allow for a permit and
// reports its outcome with the permit's Done, which suits streams whose outcome is known
// late. State changes are computed lazily from the current time: a Breaker has no timers
// and no goroutines. A Breaker is safe for concurrent use; a nil *Breaker admits every
// request and stays closed.
type Breaker struct {
	cfg      Config        // defaults filled in
	width    time.Duration // of one bucket
	epoch    time.Time     // bucket indexes count widths from here
	onChange func(from, to State)

	mu    sync.Mutex
	state State
	gen   uint64 // bumped on every state change; permits of older generations are stale
	// closedGen is gen+1 while the breaker is closed and 0 otherwise, so that Allow admits
	// without locking on the common path. It is written under mu.
	closedGen atomic.Uint64

	// Closed. The ring's counters and the failure run are atomic, so that a success is
	// counted without the lock; failures, which can trip the breaker, take it.
	buckets     []bucket // ring; bucket index i lives at i % len
	consecutive atomic.Int64

	// Open.
	openUntil time.Time
	trips     int // trips since the breaker last closed; the open time doubles with each

	// forced holds the state an operator forced (ForceOpen, ForceClosed) until Reset;
	// heldClosed mirrors forced && state == Closed for readers that do not lock.
	forced     bool
	heldClosed atomic.Bool

	// Half-open.
	probes         int // probes of the current generation in flight
	probeSuccesses int

	// State changes waiting for OnStateChange, delivered in order by one goroutine at a time.
	pending    []transition
	delivering bool
}

// bucket counts the outcomes of one slice of the window. stamp is the slice's index
// plus one (0: empty); a bucket found holding an older slice is reset before use.
type bucket struct {
	stamp    atomic.Int64
	failures atomic.Int64
	slow     atomic.Int64 // slow outcomes, also counted as successes
	// successes are counted in shards, each on its own cache line, so that cores
	// recording successes at once do not contend for one counter.
	successes [successShards]shard
}

const successShards = 4

type shard struct {
	n atomic.Int64
	_ [56]byte
}

// addSuccess counts one success at now in a shard picked by the clock reading's lowest
// bits: callers on different cores read different nanoseconds, so they spread over the
// shards as a random pick would, without the cost of a generator.
func (bk *bucket) addSuccess(now time.Time) {
	bk.successes[uint(now.Nanosecond())%successShards].n.Add(1)
}

// successCount sums the shards.
func (bk *bucket) successCount() (n int64) {
	for i := range bk.successes {
		n += bk.successes[i].n.Load()
	}
	return n
}

// clear zeroes the bucket's counts.
func (bk *bucket) clear() {
	for i := range bk.successes {
		bk.successes[i].n.Store(0)
	}
	bk.failures.Store(0)
	bk.slow.Store(0)
}

type transition struct{ from, to State }

// New returns a closed breaker configured by cfg (zero fields take their defaults),
// or an error saying what is wrong with cfg.
func New(cfg Config) (*Breaker, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("llmclient: %w", err)
	}
	cfg = cfg.withDefaults()
	b := &Breaker{
		cfg:      cfg,
		width:    cfg.Window / time.Duration(cfg.Buckets),
		epoch:    time.Now(),
		onChange: cfg.OnStateChange,
		buckets:  make([]bucket, cfg.Buckets),
	}
	b.closedGen.Store(1) // closed, generation 0
	return b, nil
}

// Config returns the breaker's configuration, defaults filled in.
func (b *Breaker) Config() Config {
	if b == nil {
		return DefaultConfig()
	}
	return b.cfg
}

// Permit is the breaker's permission for one request. Call Done exactly once with
// the request's outcome, from any goroutine; a half-open probe that is never done keeps its
// slot until the breaker changes state. The zero Permit is valid: its Done does
// nothing.
type Permit struct {
	b     *Breaker
	gen   uint64
	probe bool
}

// Probe reports whether the permit is one of the half-open breaker's probes.
func (p Permit) Probe() bool { return p.probe }

// Allow asks to send one request. It returns a permit when the breaker is closed, or when it
// is half-open and a probe slot is free. Otherwise it returns ErrOpen itself (compare
// with errors.Is). An open breaker whose open time has passed turns half-open here.
func (b *Breaker) Allow() (Permit, error) {
	if b == nil {
		return Permit{}, nil
	}
	if g := b.closedGen.Load(); g != 0 {
		return Permit{b: b, gen: g - 1}, nil
	}
	b.mu.Lock()
	if b.state == Closed {
		p := Permit{b: b, gen: b.gen}
		b.mu.Unlock()
		return p, nil
	}
	if b.state == Open && !b.forced {
		b.halfOpenIfDue(time.Now())
	}
	var (
		p   Permit
		err = ErrOpen
	)
	if b.state == HalfOpen && b.probes < b.cfg.HalfOpenProbes {
		b.probes++
		p, err = Permit{b: b, gen: b.gen, probe: true}, nil
	}
	deliver := b.claimDelivery()
	b.mu.Unlock()
	if deliver {
		b.deliver()
	}
	return p, err
}

// Done reports the outcome of the permitted request. A permit issued before the breaker
// last changed state is stale: its outcome is ignored, and it holds no probe slot of the
// current half-open state. An outcome other than the four defined is treated as
// Ignore. Done must be called exactly once per permit; calling it again corrupts
// the counts.
func (p Permit) Done(o Outcome) {
	if p.b == nil || (!o.counted() && !p.probe) {
		return
	}
	p.DoneAt(o, time.Now())
}

// counted reports whether the outcome counts in the window.
func (o Outcome) counted() bool { return o == Success || o == Failure || o == Slow }

// DoneAt is Done at the time now, for callers that have just read the clock.
func (p Permit) DoneAt(o Outcome, now time.Time) {
	b := p.b
	if b == nil || (!o.counted() && !p.probe) {
		return
	}
	if o == Success && !p.probe {
		// A closed-state success: counted without the lock. A permit whose generation is
		// no longer the closed one is stale and ignored, as below.
		if b.closedGen.Load() == p.gen+1 {
			b.slot(b.index(now)).addSuccess(now)
			if b.consecutive.Load() != 0 { // a shared line: written only when it changes
				b.consecutive.Store(0)
			}
		}
		return
	}
	b.mu.Lock()
	if p.gen != b.gen {
		b.mu.Unlock()
		return
	}
	// The generation matches, so the state is the one that issued the permit: half-open
	// for a probe, closed otherwise.
	if p.probe {
		b.probeDone(o, now)
	} else {
		b.record(o, now)
	}
	deliver := b.claimDelivery()
	b.mu.Unlock()
	if deliver {
		b.deliver()
	}
}

// Admits reports whether Allow would admit a request now (closed, or half-open with a
// free probe slot, or open past its open time), without taking a permit.
func (b *Breaker) Admits() bool {
	if b == nil || b.closedGen.Load() != 0 {
		return true
	}
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case Open:
		return !b.forced && !now.Before(b.openUntil)
	case HalfOpen:
		return b.probes < b.cfg.HalfOpenProbes
	}
	return true
}

// Admission is whether a breaker admits a request at one moment, and if not, until when.
type Admission struct {
	// Admits is true when Allow would give a permit: closed, half-open with a free probe
	// slot, or open past its open time.
	Admits bool
	// Forced is true while an operator holds the state (ForceOpen, ForceClosed).
	Forced bool
	// Until is when a refusing breaker may admit again: the end of its open time. It is
	// zero while admitting, while forced open (until Reset), and while half-open with
	// every probe out (until a probe ends).
	Until time.Time
}

// AdmissionAt reports whether the breaker admits a request at now, without taking a
// permit, and until when it refuses. A closed breaker answers with one atomic load.
func (b *Breaker) AdmissionAt(now time.Time) Admission {
	if b == nil {
		return Admission{Admits: true}
	}
	if b.closedGen.Load() != 0 {
		return Admission{Admits: true, Forced: b.heldClosed.Load()}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	a := Admission{Forced: b.forced}
	switch b.state {
	case Open:
		if b.forced {
			return a
		}
		if !now.Before(b.openUntil) {
			a.Admits = true
			return a
		}
		a.Until = b.openUntil
	case HalfOpen:
		a.Admits = b.probes < b.cfg.HalfOpenProbes
	default:
		a.Admits = true
	}
	return a
}

// HeldClosed reports whether an operator holds the breaker closed (ForceClosed, until
// Reset). It costs one atomic load.
func (b *Breaker) HeldClosed() bool { return b != nil && b.heldClosed.Load() }

// State returns the breaker's state now. An open breaker whose open time has passed turns
// half-open here.
func (b *Breaker) State() State {
	if b == nil {
		return Closed
	}
	b.mu.Lock()
	if b.state == Open {
		b.halfOpenIfDue(time.Now())
	}
	s := b.state
	deliver := b.claimDelivery()
	b.mu.Unlock()
	if deliver {
		b.deliver()
	}
	return s
}

// Snapshot is a breaker's state and counters at one moment, for metrics and
// diagnostics.
type Snapshot struct {
	State State
	// Successes and Failures are the counted outcomes in the window (closed state only);
	// Slow counts the successes that were slow.
	Successes, Failures, Slow int
	// ConsecutiveFailures is the current run of failures (closed state only).
	ConsecutiveFailures int
	// Trips is how many times the breaker opened since it last closed.
	Trips int
	// OpenRemaining is how long the breaker stays open, 0 unless open.
	OpenRemaining time.Duration
	// ProbesInFlight is how many half-open probes are out (half-open state only).
	ProbesInFlight int
	// Forced is true while an operator holds the state (ForceOpen, ForceClosed).
	Forced bool
}

// Snapshot returns the breaker's state and counters now. Like State, it turns an open
// breaker whose open time has passed half-open.
func (b *Breaker) Snapshot() Snapshot {
	if b == nil {
		return Snapshot{}
	}
	now := time.Now()
	b.mu.Lock()
	switch b.state {
	case Open:
		b.halfOpenIfDue(now)
	}
	s := Snapshot{State: b.state, Trips: b.trips, Forced: b.forced}
	switch b.state {
	case Closed:
		succ, fail, slow := b.counts(b.index(now))
		s.Successes, s.Failures, s.Slow = int(succ), int(fail), int(slow)
		s.ConsecutiveFailures = int(b.consecutive.Load())
	case Open:
		if !b.forced {
			s.OpenRemaining = b.openUntil.Sub(now)
		}
	case HalfOpen:
		s.ProbesInFlight = b.probes
	}
	deliver := b.claimDelivery()
	b.mu.Unlock()
	if deliver {
		b.deliver()
	}
	return s
}

// record counts a closed-state outcome at now and trips the breaker when a rule says so.
// b.mu is held.
func (b *Breaker) record(o Outcome, now time.Time) {
	idx := b.index(now)
	bk := b.slot(idx)
	switch o {
	case Success:
		bk.addSuccess(now)
		b.consecutive.Store(0)
	case Slow:
		bk.addSuccess(now)
		bk.slow.Add(1)
		b.consecutive.Store(0)
		succ, fail, slow := b.counts(idx)
		if total := succ + fail; !b.forced && total >= int64(b.cfg.MinRequests) && float64(slow) >= b.cfg.SlowCallRatio*float64(total) {
			b.setState(Open, now)
		}
	case Failure:
		bk.failures.Add(1)
		run := b.consecutive.Add(1)
		succ, fail, _ := b.counts(idx)
		total := succ + fail
		if !b.forced && (run >= int64(b.cfg.ConsecutiveFailures) ||
			(total >= int64(b.cfg.MinRequests) && float64(fail) >= b.cfg.FailureRatio*float64(total))) {
			b.setState(Open, now)
		}
	}
}

// ForceOpen opens the breaker and holds it open until Reset: every request is refused, no
// probe is admitted. OnStateChange hears of the change, if any. It is safe to call at any
// time, from any goroutine.
func (b *Breaker) ForceOpen() { b.force(Open) }

// ForceClosed closes the breaker and holds it closed until Reset: outcomes are still
// counted (Snapshot shows them), but no rule trips it. OnStateChange hears of the change,
// if any.
func (b *Breaker) ForceClosed() { b.force(Closed) }

// Reset ends a forced state and closes the breaker with an empty window and the base open
// time, as after a recovery. OnStateChange hears of the change, if any.
func (b *Breaker) Reset() {
	if b == nil {
		return
	}
	now := time.Now()
	b.mu.Lock()
	b.forced = false
	b.heldClosed.Store(false)
	if b.state != Closed {
		b.setState(Closed, now)
	} else {
		b.trips = 0
		b.resetWindow()
	}
	deliver := b.claimDelivery()
	b.mu.Unlock()
	if deliver {
		b.deliver()
	}
}

func (b *Breaker) force(to State) {
	if b == nil {
		return
	}
	now := time.Now()
	b.mu.Lock()
	if b.state != to {
		b.setState(to, now)
	}
	b.forced = true
	b.heldClosed.Store(to == Closed)
	deliver := b.claimDelivery()
	b.mu.Unlock()
	if deliver {
		b.deliver()
	}
}

// index returns the window slice that now falls in.
func (b *Breaker) index(now time.Time) int64 { return int64(now.Sub(b.epoch) / b.width) }

// slot returns the bucket of slice idx, resetting it when it still holds an older slice.
// Two goroutines rolling a bucket over at once may lose a count: the window is a health
// estimate, not a ledger. A bucket already holding a newer slice (a clock read just
// before a rollover) takes the count as it is.
func (b *Breaker) slot(idx int64) *bucket {
	bk := &b.buckets[idx%int64(len(b.buckets))]
	if old := bk.stamp.Load(); old < idx+1 && bk.stamp.CompareAndSwap(old, idx+1) {
		bk.clear()
	}
	return bk
}

// counts sums the outcomes of the window that ends with slice idx.
func (b *Breaker) counts(idx int64) (successes, failures, slow int64) {
	oldest := idx - int64(len(b.buckets)) + 1
	for i := range b.buckets {
		bk := &b.buckets[i]
		if st := bk.stamp.Load() - 1; st >= oldest && st <= idx {
			successes += bk.successCount()
			failures += bk.failures.Load()
			slow += bk.slow.Load()
		}
	}
	return successes, failures, slow
}

// resetWindow forgets every counted outcome. b.mu is held.
func (b *Breaker) resetWindow() {
	for i := range b.buckets {
		bk := &b.buckets[i]
		bk.stamp.Store(0)
		bk.clear()
	}
	b.consecutive.Store(0)
}

// probeDone handles the outcome of a current half-open probe. b.mu is held.
func (b *Breaker) probeDone(o Outcome, now time.Time) {
	if b.probes > 0 {
		b.probes--
	}
	switch o {
	case Success:
		b.probeSuccesses++
		if b.probeSuccesses >= b.cfg.SuccessesToClose {
			b.setState(Closed, now)
		}
	case Failure, Slow:
		b.setState(Open, now)
	}
}

// halfOpenIfDue turns the open breaker half-open when its open time has passed, unless an
// operator holds it open. b.mu is held.
func (b *Breaker) halfOpenIfDue(now time.Time) {
	if !b.forced && !now.Before(b.openUntil) {
		b.setState(HalfOpen, now)
	}
}

// openTimeout is the open time after the n-th trip since the breaker last closed:
// OpenTimeout doubled n-1 times, capped at MaxOpenTimeout.
func (b *Breaker) openTimeout(n int) time.Duration {
	d := b.cfg.OpenTimeout
	for ; n > 1 && d < b.cfg.MaxOpenTimeout; n-- {
		if d > b.cfg.MaxOpenTimeout/2 {
			return b.cfg.MaxOpenTimeout
		}
		d *= 2
	}
	return min(d, b.cfg.MaxOpenTimeout)
}

// setState moves the breaker to state to at now, starts a new generation and queues the
// change for OnStateChange. b.mu is held.
func (b *Breaker) setState(to State, now time.Time) {
	from := b.state
	b.state = to
	b.gen++
	b.closedGen.Store(0)
	switch to {
	case Open:
		b.trips++
		b.openUntil = now.Add(b.openTimeout(b.trips))
	case HalfOpen:
		b.probes, b.probeSuccesses = 0, 0
	case Closed:
		b.trips, b.probes, b.probeSuccesses = 0, 0, 0
		b.resetWindow()
		b.closedGen.Store(b.gen + 1)
	}
	if b.onChange != nil {
		b.pending = append(b.pending, transition{from, to})
	}
}

// claimDelivery reports whether the caller must deliver queued state changes after
// unlocking: there are some and no other goroutine is delivering them. b.mu is held.
func (b *Breaker) claimDelivery() bool {
	if len(b.pending) == 0 || b.delivering {
		return false
	}
	b.delivering = true
	return true
}

// deliver calls OnStateChange for every queued state change, in order, without holding
// b.mu, until the queue is empty. Changes queued meanwhile, by other goroutines or by the
// callback itself through the breaker's methods, are delivered by this loop too.
func (b *Breaker) deliver() {
	done := false
	defer func() {
		if !done { // the callback panicked: let a later caller deliver the rest
			b.mu.Lock()
			b.delivering = false
			b.mu.Unlock()
		}
	}()
	for {
		b.mu.Lock()
		if len(b.pending) == 0 {
			b.delivering = false
			b.mu.Unlock()
			done = true
			return
		}
		t := b.pending[0]
		b.pending = append(b.pending[:0], b.pending[1:]...)
		b.mu.Unlock()
		b.onChange(t.from, t.to)
	}
}
