package llmclient

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/ratelimit"
)

// keyLimiter enforces one scope's Limits, and those it learns from the upstream's headers.
// A nil *keyLimiter limits nothing. It is safe for concurrent use.
type keyLimiter struct {
	state limitstore.State
	// reserver is limitstore.ReserverOf(state).
	reserver limitstore.Reserver
	// joint reserves on state and its parts' states together (nil without parts).
	joint *limitstore.Joint
	// shared is set when the state lives in a store given with WithLimitStore: other
	// Clients may admit through it too, and see the key's pauses and evictions.
	shared  bool
	mode    ratelimit.Mode
	maxWait time.Duration // 0: no bound but the deadline
	// waitCap is the longest wait of a request without a deadline, before any wait (see
	// limit): 0 in fail-fast mode, else maxWait, or -1 for no bound.
	waitCap  time.Duration
	metering ratelimit.Metering
	slots    bool // MaxConcurrent is set
	// slotState holds the key's concurrency slots: state itself, or, after Update changed
	// MaxConcurrent on a private state, a state of its own (the buckets stay on state).
	slotState limitstore.State
	// retired is closed when Update replaces a private limiter with slots by one on a new
	// state (MaxConcurrent changed): the requests waiting here for a slot then acquire on
	// the new one (errRetired). nil for a shared or slotless limiter.
	retired chan struct{}
	// limited is set while the scope limits anything, by its Limits or by limits learned
	// from the upstream's headers; gate while batch traffic passes the batch lane first.
	limited, gate atomic.Bool
	inFlight      atomic.Int64
	sizes         sizeQuantile
	queue         queueWatch
	sync          headerSync
	// qty is the quantity its token buckets meter, and rule how its vendor meters it
	// (limiter_quantity.go). parts are its limiters of the other quantities its Limits set
	// (ITPM, OTPM), scopes the quota scopes its upstream names; extra is set when it has
	// either. models are the models a scope covers (empty: all). hideInput: a part meters
	// the input-token window, which the tokens window must not stand for.
	qty       quantity
	rule      ratelimit.Rule
	parts     []*keyLimiter
	scopes    []*keyLimiter
	models    []string
	extra     bool
	hideInput bool
	// held: its token charges are held in flight until the request ends (an output
	// quantity the vendor counts at the end, on a state that keeps such holds);
	// vendorBurst (float64 bits; 0: unknown) the vendor's bucket for it, as its headers
	// tell it.
	held        bool
	vendorBurst atomic.Uint64
	// partHeld: a part's charges are held in flight (its held is set).
	partHeld bool
}

// newKeyLimiter returns a private limiter for l, or nil when l limits nothing.
func newKeyLimiter(l Limits, cfg *limiterConfig) *keyLimiter {
	return newNamedKeyLimiter("", l, cfg)
}

// newNamedKeyLimiter returns a limiter for l whose state is the store's scope name ("" for
// a private one), or nil when l limits nothing: a caller partition's.
func newNamedKeyLimiter(name string, l Limits, cfg *limiterConfig) *keyLimiter {
	if l.zero() {
		return nil
	}
	k := newScopeLimiter(name, l, cfg)
	cfg.withParts(k, name, l, ratelimit.Rule{})
	k.refresh()
	return k
}

// newScopeLimiter returns the limiter of the scope name with limits l, even when l limits
// nothing: an API key's, which may learn its limits from the upstream's headers and,
// in a store, shares the key's pauses and evictions.
func newScopeLimiter(name string, l Limits, cfg *limiterConfig) *keyLimiter {
	return limiterOn(cfg.open(name, l), cfg.store != nil && name != "", l, cfg)
}

// limiterOn returns the limiter enforcing l on state, which a store shares when shared.
func limiterOn(state limitstore.State, shared bool, l Limits, cfg *limiterConfig) *keyLimiter {
	spec := l.spec(cfg)
	k := &keyLimiter{
		state:     state,
		slotState: state,
		reserver:  limitstore.ReserverOf(state),
		shared:    shared,
		mode:      cfg.mode,
		maxWait:   cfg.maxWait,
		metering:  l.Metering,
		slots:     l.MaxConcurrent > 0,
	}
	if k.slots && !k.shared {
		k.retired = make(chan struct{})
	}
	k.queue.target = cfg.queueTarget
	switch k.waitCap = -1; {
	case k.mode == ratelimit.FailFast:
		k.waitCap = 0
	case k.maxWait > 0:
		k.waitCap = k.maxWait
	}
	k.sync.init(spec, !k.shared, cfg)
	k.apply(spec)
	return k
}

// apply records what spec, the state's buckets now, limits.
func (l *keyLimiter) apply(spec limitstore.Spec) {
	perMinute := spec.Requests.Limited() || spec.Tokens.Limited()
	l.limited.Store(l.extra || l.slots || perMinute || spec.DailyRequests.Limited() || spec.DailyTokens.Limited())
	l.gate.Store(perMinute && l.sync.cfg.batchShare < 1)
	var ns int64
	if spec.Tokens.Limited() {
		ns = int64(min(1e9/spec.Tokens.PerSecond, 1e15))
	}
	l.sync.tokNanos.Store(ns)
	l.queue.setAllowance(spec)
}

// tokensLimited reports whether the scope has a token bucket, configured or learned.
func (l *keyLimiter) tokensLimited() bool {
	return l.sync.tokNanos.Load() > 0 || l.sync.dailyTokens.Load()
}

// admission is what a request asks of a key's limiter.
type admission struct {
	// prompt and out are the request's cost: its prompt estimate, which the learned
	// charge ratio scales, and the output reserved for it (MaxTokens or the default).
	prompt, out int
	prio        ratelimit.Priority
	// switchable: a key paused in the store (a 429 seen by another replica) fails at once
	// with a *keyPausedError instead of waiting, so the caller can move to another key.
	switchable bool
	// within caps the whole wait on top of the mode, WithMaxWait and the deadline
	// (negative: no cap of its own): the wait threshold when the call has somewhere else
	// to go.
	within time.Duration
	// service is the upstream's expected service time (0: unknown): with a deadline, the
	// wait must leave it. It is read from svc (nil: unknown) by admit only when the
	// context has a deadline, or for a refusal's message: a call without a deadline
	// never needs it.
	service time.Duration
	svc     *serviceTimes
	// stale is service decayed by the staleness of its samples; probe is set once the
	// request is admitted as the upstream's probe on it (see serviceTimes).
	stale time.Duration
	probe bool
	// streaming and svcOut pick svc's estimate: a stream's, and the reserved output.
	streaming bool
	svcOut    int
	// now is the caller's reading of the clock when it asked (zero: none), which a
	// reservation made before any wait uses instead of the store reading its own.
	now time.Time
	// lim0 is limit's answer before any wait, kept by admit when haveLim0: without a
	// deadline it stays the answer until something waits.
	lim0     time.Duration
	haveLim0 bool
	// fit is limit's last answer before the wait threshold (within): the longest wait
	// the request's deadline and WithMaxWait accept (negative: no bound).
	fit time.Duration
	// deadline is the context's, read once per admission (admit sets it); hasDeadline
	// says whether it has one.
	deadline    time.Time
	hasDeadline bool
	// model is the upstream's model name, which picks the quota scopes that cover it.
	model string
	// noSleep: reserve returns the wait it was granted without sleeping it (a request
	// admitted by several limiters sleeps once, the longest of their waits).
	noSleep bool
	// cached is the part of prompt predicted to be read from the vendor's cache, when
	// cacheKnown (limiter_reads.go).
	cached     int
	cacheKnown bool
}

// limitLease is what an admitted request holds until its attempt is settled. The zero
// lease holds nothing.
type limitLease struct {
	// partLease is the charge of l's own buckets.
	partLease
	slot limitstore.SlotLease
	held bool // a concurrency slot is held
	// res is the reservation being made (kept here so that it need not be allocated
	// for the call through keyLimiter.reserver).
	res limitstore.Reservation
	// parts are the charges of l's parts, in l.parts order (the first len(l.parts)).
	parts [maxParts]partLease
	// more are the leases of l's scopes, in l.scopes order (a zero lease for a scope that
	// does not cover the model); nil when l has none.
	more []limitLease
}

// partLease is what an admitted request holds of one limiter's token buckets: a key's
// own, or one of its parts'.
type partLease struct {
	// Share is the charge and its grant, which a limitstore.Joint reserves in place.
	// Tokens is the charge taken from the token buckets: Estimate, the prompt estimate
	// (calibrated per model family) times the key's usage ratio plus the reserved output,
	// times the charge multiplier. Grant is the main lane's admission: its store mark,
	// predicted levels and totals. InFlight and VendorBurst are set for a reservation only.
	limitstore.Share
	l         *keyLimiter
	prompt    int  // the prompt estimate
	batch     bool // the batch lane was charged too
	predicted bool // the prompt's cache reads were predicted (keyLimiter.predicts)
}

// own returns ls's charge of its own buckets, nil for a nil ls.
func (ls *limitLease) own() *partLease {
	if ls == nil {
		return nil
	}
	return &ls.partLease
}

// acquire admits a request of the given token cost: a concurrency slot first, then, for
// batch requests, the batch lane, then the request and token buckets, waiting in arrival
// order. It returns how long it waited. When the wait would not fit (fail-fast mode,
// WithMaxWait, the context's deadline) it returns at once, without sleeping, an *Error of
// failure.RateLimited wrapping ErrRateLimited whose message names the wait that did not fit.
// A canceled context's error is returned as is; nothing stays charged either way.
func (l *keyLimiter) acquire(ctx context.Context, cost int, prio ratelimit.Priority) (limitLease, time.Duration, error) {
	var ls limitLease
	waited, err := l.acquireInto(ctx, &admission{out: cost, prio: prio, within: -1}, &ls)
	return ls, waited, err
}

// acquireInto is acquire for the admission adm (see admission), in place: the lease goes
// to *ls (the attempt's own, so that nothing large is copied on every call), which holds
// the zero lease when the request is not admitted.
func (l *keyLimiter) acquireInto(ctx context.Context, adm *admission, ls *limitLease) (time.Duration, error) {
	if l == nil || !l.limited.Load() {
		*ls = limitLease{}
		return 0, nil
	}
	if len(l.scopes) == 0 { // the parts, if any, reserve with l's buckets
		waited, err := l.admit(ctx, adm, ls, 0)
		if err != nil {
			l.paceRefusal(ctx, adm, err)
		}
		return waited, err
	}
	// Every limiter reserves first, without sleeping, so that a wait that does not fit
	// in one refuses at once; then the request sleeps the longest of their waits.
	adm.noSleep = true
	wait, err := l.admit(ctx, adm, ls, 0)
	if err == nil {
		wait, err = l.admitScopes(ctx, adm, ls, wait)
	}
	adm.noSleep = false
	if err != nil {
		l.paceRefusal(ctx, adm, err)
		return 0, err
	}
	if wait <= 0 {
		return 0, nil
	}
	if err := sleepFor(ctx, wait); err != nil {
		ls.release(0, false)
		*ls = limitLease{}
		return wait, err
	}
	return wait, nil
}

// admit is acquireInto once the limiter limits something, on l's own buckets, for a
// request that has waited so far (in the limiters before it): it returns the whole wait.
func (l *keyLimiter) admit(ctx context.Context, adm *admission, ls *limitLease, waited time.Duration) (time.Duration, error) {
	// Field by field: the grant is written whole by the reservation.
	l.beginAll(adm, ls)
	ls.slot, ls.held, ls.more = limitstore.SlotLease{}, false, nil
	adm.deadline, adm.hasDeadline = ctx.Deadline()
	if adm.hasDeadline || waited != 0 || l.slots || adm.prio == ratelimit.Batch {
		w, done, err := l.admitWaiting(ctx, adm, ls, waited)
		if done || err != nil {
			return w, err
		}
	}
	// Nothing waited before the main lane, and no deadline: reserve's steps without
	// theirs, written out.
	lim := adm.lim0
	if !adm.haveLim0 {
		if err := ctx.Err(); err != nil {
			ls.undo(false) // a batch lane's charge, taken without a wait
			*ls = limitLease{}
			return 0, err
		}
		lim = l.waitCap
		adm.fit = lim
		if adm.within >= 0 && (lim < 0 || lim > adm.within) {
			lim = adm.within
		}
	}
	r := &ls.res
	r.Lane, r.Requests, r.MaxWait = limitstore.LaneMain, 1, lim
	r.At = adm.now // nothing slept since the caller read the clock
	var wait time.Duration
	var err error
	if l.joint == nil {
		r.Tokens, r.Estimate = ls.Tokens, ls.Estimate
		r.InFlight, r.VendorBurst = l.holds(limitstore.LaneMain)
		err = l.reserver.ReserveTo(ctx, r, &ls.Grant)
		wait = ls.Grant.Wait
	} else {
		if l.held || l.partHeld {
			ls.holdAll(limitstore.LaneMain)
		}
		sh := [1 + maxParts]*limitstore.Share{&ls.Share, &ls.parts[0].Share, &ls.parts[1].Share}
		if wait, err = l.joint.Reserve(ctx, r, sh[:1+len(l.parts)]); err != nil {
			for i := range l.parts {
				ls.parts[i].Grant = limitstore.Grant{}
			}
		}
	}
	if err == nil && wait <= 0 && ls.Grant.OK {
		l.inFlight.Add(1)
		return 0, nil
	}
	w, err := l.granted(ctx, limitstore.LaneMain, ls, adm, wait, err)
	if err != nil {
		ls.undo(false)
		*ls = limitLease{}
		return 0, err
	}
	if w > 0 && !adm.noSleep {
		return l.afterSleep(ctx, adm, ls, w)
	}
	l.inFlight.Add(1)
	return w, nil
}

// admitWaiting is admit once the charges are set, for a request that may wait before the
// main lane (in the limiters before l, for a slot, or on the batch lane) or has a
// deadline. It returns the whole wait, done, and admit's error, when it admitted the
// request or failed; else (no deadline, and nothing waited) the wait so far, 0, and admit
// reserves the main lane. On failure ls is the zero lease.
func (l *keyLimiter) admitWaiting(ctx context.Context, adm *admission, ls *limitLease, waited time.Duration) (time.Duration, bool, error) {
	if adm.hasDeadline {
		l.sizes.observe(ls.Tokens) // the margins it sets are for requests with deadlines
		for i, p := range l.parts {
			p.sizes.observe(ls.parts[i].Tokens)
		}
		adm.expectService()
	}
	if l.slots {
		lim, err := l.limit(ctx, 0, adm, 0)
		if err != nil {
			*ls = limitLease{}
			return 0, true, err
		}
		adm.lim0, adm.haveLim0 = lim, !adm.hasDeadline && waited == 0
		lease, w, err := l.acquireSlot(ctx, adm.prio == ratelimit.Batch, lim)
		waited += w
		if err != nil {
			*ls = limitLease{}
			if err == errRetired {
				return waited, true, err
			}
			return waited, true, l.asError(err, 0)
		}
		ls.slot, ls.held = lease, true
	}
	if adm.prio == ratelimit.Batch && (l.gate.Load() || l.joint != nil && l.gated()) {
		w, err := l.reserve(ctx, limitstore.LaneBatch, ls, waited, adm)
		if err != nil {
			ls.undo(false)
			*ls = limitLease{}
			return waited, true, err
		}
		waited += w
	}
	if !adm.hasDeadline && waited == 0 {
		return 0, false, nil
	}
	w, err := l.reserve(ctx, limitstore.LaneMain, ls, waited, adm)
	if err != nil {
		ls.undo(false)
		*ls = limitLease{}
		return waited, true, err
	}
	waited += w
	if w > 0 && !adm.noSleep {
		waited, err = l.afterSleep(ctx, adm, ls, waited)
		return waited, true, err
	}
	l.inFlight.Add(1)
	return waited, true, nil
}

// afterSleep ends the admission of a request into ls that slept on the main lane, having
// waited so far: a 429 may have paused the scope while it slept, and then it waits for
// the pause, or gives up when the pause exceeds what it may still wait.
func (l *keyLimiter) afterSleep(ctx context.Context, adm *admission, ls *limitLease, waited time.Duration) (time.Duration, error) {
	for {
		b, err := l.state.Blocked(ctx)
		left := b.Paused
		if err != nil || left <= 0 {
			break
		}
		if lim, err := l.limit(ctx, waited, adm, 0); err != nil || (lim >= 0 && left > lim) {
			ls.undo(true)
			*ls = limitLease{}
			if err == nil {
				err = l.rateLimited(left)
			}
			return waited, err
		}
		if err := sleep(ctx, left); err != nil {
			ls.undo(true)
			*ls = limitLease{}
			return waited + left, err
		}
		waited += left
	}
	l.inFlight.Add(1)
	return waited, nil
}

// reserve takes the lease's cost from a lane's buckets, and its parts' costs from theirs
// (all or none), and sleeps until the reservation's time. On failure nothing stays
// charged on that lane.
func (l *keyLimiter) reserve(ctx context.Context, lane limitstore.Lane, ls *limitLease, waited time.Duration, adm *admission) (time.Duration, error) {
	lim := adm.lim0
	var err error
	var bounded bool // the queue's bound cut the wait
	var now int64    // the clock for the queue's watch: the caller's reading when it has one
	switch {
	case adm.hasDeadline:
		if now = adm.now.UnixNano(); adm.now.IsZero() || waited != 0 {
			now = time.Now().UnixNano()
		}
		lim, bounded, err = l.deadlineWait(ctx, ls.Tokens, waited, adm, now)
	case waited != 0 || !adm.haveLim0:
		lim, err = l.limit(ctx, waited, adm, 0)
	}
	fit := adm.fit
	if err != nil {
		return 0, err
	}
	// The grant goes to the lease in place: the main lane's is kept for a report; the
	// batch lane's, which comes first, only says when (the main lane's overwrites it).
	g := &ls.Grant
	var wait time.Duration
	if l.joint == nil {
		r := &ls.res
		r.Lane, r.Requests, r.Tokens, r.Estimate, r.MaxWait = lane, 1, ls.Tokens, ls.Estimate, lim
		r.InFlight, r.VendorBurst = l.holds(lane)
		r.At = adm.now // nothing slept since the caller read the clock
		if waited != 0 {
			r.At = time.Time{}
		}
		err = l.reserver.ReserveTo(ctx, r, g)
		wait = g.Wait
	} else {
		wait, bounded, err = l.reserveJoint(ctx, lane, ls, waited, adm, lim, bounded, now)
	}
	if err == nil && adm.hasDeadline && lane == limitstore.LaneMain && l.mode != ratelimit.FailFast {
		l.noteQueue(g, ls.Tokens, bounded, fit, now)
		for i, p := range l.parts {
			p.noteQueue(&ls.parts[i].Grant, ls.parts[i].Tokens, bounded, fit, now)
		}
	}
	if err == nil && wait <= 0 && g.OK && lane == limitstore.LaneMain {
		return 0, nil
	}
	return l.granted(ctx, lane, ls, adm, wait, err)
}

// errRetired is acquire's error for a request that waited for a slot of a limiter that
// Update replaced meanwhile: the caller acquires again on the key's current limiter.
var errRetired = errors.New("llmclient: the key's limiter was replaced while waiting for a slot")

// acquireSlot is l.slotState.AcquireSlot, which gives up with errRetired when Update retires
// l (see retire) while the request waits for a slot.
func (l *keyLimiter) acquireSlot(ctx context.Context, batch bool, lim time.Duration) (limitstore.SlotLease, time.Duration, error) {
	if l.retired == nil || lim == 0 {
		return l.slotState.AcquireSlot(ctx, batch, lim)
	}
	lease, _, err := l.slotState.AcquireSlot(ctx, batch, 0)
	if err == nil || !errors.Is(err, limitstore.ErrRefused) {
		return lease, 0, err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-l.retired:
			cancel()
		case <-wctx.Done():
		}
	}()
	lease, w, err := l.slotState.AcquireSlot(wctx, batch, lim)
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		err = errRetired
	}
	return lease, w, err
}

// retire wakes the requests waiting for one of l's slots, l having been replaced by a
// limiter on another state: they acquire on that one. The leases l granted are still
// released to l's state.
func (l *keyLimiter) retire() {
	if l != nil && l.retired != nil {
		close(l.retired)
	}
}

// granted ends a reservation on lane of the lease's charges, made with the wait and
// error given: a refusal or an error gives the lease's grant back as none, a wait is
// slept (but when adm.noSleep) or, on a key paused in the store, refused for another
// key (adm.switchable).
func (l *keyLimiter) granted(ctx context.Context, lane limitstore.Lane, ls *limitLease, adm *admission, wait time.Duration, err error) (time.Duration, error) {
	g := &ls.Grant
	if err != nil {
		*g = limitstore.Grant{}
		return 0, l.asError(err, 0)
	}
	if !g.OK {
		e := l.rateLimited(wait)
		*g = limitstore.Grant{}
		if adm.expectService(); adm.service > 0 {
			e.Message += ", and the upstream's calls take up to " + adm.service.Round(time.Millisecond).String()
		}
		return 0, e
	}
	if lane == limitstore.LaneBatch {
		ls.batch = true
	}
	if wait > 0 && adm.switchable {
		// A wait may come from a pause that a 429 seen elsewhere (another replica sharing
		// the store) put on the key: then another key is better than waiting.
		if b, err := l.state.Blocked(ctx); err == nil && b.Paused > 0 {
			ls.retract(lane)
			return 0, &keyPausedError{left: b.Paused}
		}
	}
	if wait <= 0 {
		return 0, nil
	}
	if adm.noSleep {
		return wait, nil // the caller sleeps, once every limiter of the request said when
	}
	if err := sleepFor(ctx, wait); err != nil {
		ls.retract(lane)
		return 0, err
	}
	return wait, nil
}

// noteQueue tells l's queue watch, at now, of a request with a deadline of the given cost
// on the main lane, whose grant on l's buckets is g: granted or refused with its wait
// (refused early when bounded, the queue's bound having cut the wait, and within fit,
// what the deadline and WithMaxWait accept), and the bucket's refill time left unused
// after an admission without a wait.
func (l *keyLimiter) noteQueue(g *limitstore.Grant, cost int, bounded bool, fit time.Duration, now int64) {
	ns := l.sync.tokNanos.Load()
	if ns <= 0 || l.queue.target <= 0 {
		return
	}
	if !g.OK && bounded && (fit < 0 || g.Wait <= fit) {
		// Refused early: first come first served would queue it for the time the bucket
		// takes to refill its cost.
		l.queue.refuse(int64(min(float64(cost)*float64(ns), float64(time.Hour))))
	}
	var spare time.Duration
	if g.OK && g.Wait == 0 && g.Levels.Tokens > 0 {
		spare = time.Duration(min(g.Levels.Tokens*float64(ns), float64(time.Hour)))
	}
	l.queue.note(g.Wait, spare, fit, now)
}

// deadlineWait is the longest wait l's buckets may grant a request with a deadline, of
// the given cost, that has waited so far (negative: no bound): see limit, less the margin
// the deadline leaves for the request's size, and within the queue's bound at now (the
// margin and the queue's bound only bound a deadline's wait); bounded reports that the
// queue's bound cut it.
func (l *keyLimiter) deadlineWait(ctx context.Context, cost int, waited time.Duration, adm *admission, now int64) (lim time.Duration, bounded bool, err error) {
	ns := l.sync.tokNanos.Load()
	margin := l.sizes.margin(cost, ns)
	if lim, err = l.limit(ctx, waited, adm, margin); err != nil {
		return 0, false, err
	}
	if ns > 0 && l.queue.target > 0 {
		if b := l.queue.bound(ns, max(l.sizes.q.Load(), int64(cost)), now); b >= 0 {
			if b = max(b-waited-margin, 0); lim < 0 || b < lim {
				lim, bounded = b, true
			}
		}
	}
	return lim, bounded, nil
}

// reserveJoint is reserve's reservation for a limiter with parts: its own and its parts'
// in one limitstore.Joint, all admitted at once or none, within lim and, with a
// deadline, each part's own bound at now. It returns the longest wait granted, and whether
// the queue's bound cut the wait (bounded: the key's cut lim).
func (l *keyLimiter) reserveJoint(ctx context.Context, lane limitstore.Lane, ls *limitLease, waited time.Duration, adm *admission, lim time.Duration, bounded bool, now int64) (time.Duration, bool, error) {
	sh := [1 + maxParts]*limitstore.Share{&ls.Share, &ls.parts[0].Share, &ls.parts[1].Share}
	parts := ls.parts[:len(l.parts)]
	if l.held || l.partHeld {
		ls.holdAll(lane)
	}
	if adm.hasDeadline { // else every limiter's bound is the key's
		for i, p := range l.parts {
			plim, pb, err := p.deadlineWait(ctx, parts[i].Tokens, waited, adm, now)
			if err != nil {
				return 0, false, err
			}
			if plim >= 0 && (lim < 0 || plim < lim) {
				lim, bounded = plim, pb
			}
		}
	}
	r := &ls.res
	r.Lane, r.Requests, r.MaxWait = lane, 1, lim
	if waited == 0 {
		r.At = adm.now // nothing slept since the caller read the clock
	} else {
		r.At = time.Time{}
	}
	wait, err := l.joint.Reserve(ctx, r, sh[:1+len(parts)])
	if err != nil {
		for i := range parts {
			parts[i].Grant = limitstore.Grant{}
		}
		return 0, false, err
	}
	if ls.Grant.OK && lane == limitstore.LaneBatch {
		for i := range parts {
			parts[i].batch = true
		}
	}
	return wait, bounded, nil
}

// holdAll marks the lease's charges on lane held in flight where their limiters hold
// them (keyLimiter.holds).
func (ls *limitLease) holdAll(lane limitstore.Lane) {
	l := ls.l
	ls.InFlight, ls.VendorBurst = l.holds(lane)
	for i, p := range l.parts {
		ls.parts[i].InFlight, ls.parts[i].VendorBurst = p.holds(lane)
	}
}

// maxParts is the most parts a limiter has: one per quantity besides the total.
const maxParts = 2

// admit and reserveJoint list a lease's 1+maxParts shares as a literal: this fails to
// compile when maxParts is not 2.
var _ = [1]struct{}{}[maxParts-2]

// beginAll sets the lease's charges of adm: on l's buckets and, when l reserves with its
// parts (l.joint), on each part's, in one pass; their grants are written by the
// reservation. Each charge is the cost of the limiter's quantity (costOf): the prompt
// scaled by its usage ratio plus the output, or, when the prompt's cache reads are
// predicted, the two as they are; times its charge multiplier.
func (l *keyLimiter) beginAll(adm *admission, ls *limitLease) {
	k, pl := l, &ls.partLease
	n := 0
	if l.joint != nil {
		n = len(l.parts)
	}
	for i := 0; ; i++ {
		prompt, out := k.costOf(adm)
		var est int
		if pl.predicted = k.predicts(adm); pl.predicted {
			est = min(satAdd(prompt, out), maxCost) // the cache reads are known: no usage ratio
		} else {
			est = k.sync.estimate(prompt, out)
		}
		pl.l, pl.prompt, pl.Estimate, pl.Tokens, pl.batch = k, prompt, est, k.sync.charge(est), false
		pl.InFlight, pl.VendorBurst = false, 0 // set by a joint reservation that holds it
		if i == n {
			return
		}
		k, pl = l.parts[i], &ls.parts[i]
	}
}

// gated reports whether a batch request passes a batch lane first: l's, or a part's.
func (l *keyLimiter) gated() bool {
	if l.gate.Load() {
		return true
	}
	for _, p := range l.parts {
		if p.gate.Load() {
			return true
		}
	}
	return false
}

// giveBack returns the charge on lane.
func (pl *partLease) giveBack(lane limitstore.Lane) {
	if pl.l.held && lane == limitstore.LaneMain {
		_ = pl.l.state.(limitstore.InFlightAdjuster).AdjustInFlight(context.Background(), pl.Grant.Mark, pl.Tokens, -1, -pl.Tokens)
		return
	}
	_ = pl.l.state.Adjust(context.Background(), lane, -1, -pl.Tokens)
}

// holds reports whether l's charge on lane is held in flight until the request ends
// (keyLimiter.held), and the vendor's bucket for it (0: unknown).
func (l *keyLimiter) holds(lane limitstore.Lane) (bool, float64) {
	if !l.held || lane != limitstore.LaneMain {
		return false, 0
	}
	return true, math.Float64frombits(l.vendorBurst.Load())
}

// retract returns the lease's charges on lane, its own and its parts' (on the batch
// lane, those it charged).
func (ls *limitLease) retract(lane limitstore.Lane) {
	ls.partLease.retract(lane)
	for i := range ls.l.parts {
		ls.parts[i].retract(lane)
	}
}

// retract is limitLease.retract for one limiter's charge.
func (pl *partLease) retract(lane limitstore.Lane) {
	if lane == limitstore.LaneBatch {
		if !pl.batch {
			return
		}
		pl.batch = false
	}
	pl.giveBack(lane)
}

// limit returns the longest wait the request may still accept (negative: no bound), or
// the context's error when it is already done. With a deadline and an expected service
// time, the wait must leave that time before the deadline; when even no wait leaves it,
// the request is refused (a rate-limited *Error). margin is taken from the deadline's
// part of the bound only (see sizeQuantile.margin).
func (l *keyLimiter) limit(ctx context.Context, waited time.Duration, adm *admission, margin time.Duration) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	hasDeadline := adm.hasDeadline
	var until time.Duration
	if hasDeadline {
		until = time.Until(adm.deadline)
	}
	lim := time.Duration(-1) // what waitLimit returns, with the deadline read once
	switch {
	case l.mode == ratelimit.FailFast:
		lim = 0
	case l.maxWait > 0:
		lim = max(l.maxWait-waited, 0)
	}
	if hasDeadline && l.mode != ratelimit.FailFast {
		// A wait that ends at the deadline leaves no time for the call itself.
		if left := max(until-1, 0); lim < 0 || left < lim {
			lim = left
		}
	}
	if hasDeadline && (adm.service > 0 || margin > 0) {
		service := adm.service
		if adm.probe {
			service = adm.stale
		}
		left := until - 1 - service
		if left < 0 && adm.stale < service && until-1-adm.stale >= 0 && adm.svc != nil &&
			adm.svc.probe(adm.deadline.Add(-until).UnixNano(), until) {
			// Only a stale estimate refuses it: let it try the estimate.
			adm.probe, service = true, adm.stale
			left = until - 1 - service
		}
		if left < 0 {
			return 0, l.noTime(adm.service)
		}
		if left = max(left-margin, 0); lim < 0 || left < lim {
			lim = left
		}
	}
	adm.fit = lim // what the request's deadline and WithMaxWait accept
	if adm.within >= 0 && (lim < 0 || lim > adm.within-waited) {
		lim = max(adm.within-waited, 0)
	}
	return lim, nil
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

func waitLimit(ctx context.Context, mode ratelimit.Mode, maxWait, waited time.Duration) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if mode == ratelimit.FailFast {
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
	return &Error{Class: failure.RateLimited, Err: ErrRateLimited, Message: msg, AdmitAfter: max(wait, 0)}
}

// noTime is the refusal of a request whose expected service time does not fit before its
// deadline, even without waiting.
func (l *keyLimiter) noTime(service time.Duration) *Error {
	return &Error{Class: failure.RateLimited, Err: ErrRateLimited,
		Message: "the limiter cannot admit the request in time (the upstream's expected service time of " +
			service.Round(time.Millisecond).String() + " does not fit before the deadline)"}
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

// undo gives back what a failed acquire took: the batch lane's charges, the main lane's
// when main is true (its own and its parts'), and the slot.
func (ls *limitLease) undo(main bool) {
	ls.retract(limitstore.LaneBatch)
	if main {
		ls.retract(limitstore.LaneMain)
	}
	if ls.held {
		ls.l.slotState.ReleaseSlot(ls.slot)
	}
}

// releaseUsage settles the lease with the attempt's reported usage (nil when none), as
// release does, and feeds the key's usage ratio where the key does not count all of a
// prompt's input (free cache reads): the estimate is already the model family's
// calibrated one (family.go). Each part settles with its own share of the usage.
func (ls *limitLease) releaseUsage(u *Usage, used bool) {
	for i := range ls.more {
		ls.more[i].releaseUsage(u, used)
	}
	l := ls.l
	if l == nil {
		return
	}
	for i := range l.parts {
		ls.parts[i].settleUsage(u, used)
	}
	ls.settleUsage(u, used)
	ls.done()
}

// settleUsage settles the charge with the usage u (nil when none), and feeds it to the
// limiter's usage ratio (keyLimiter.learn).
func (pl *partLease) settleUsage(u *Usage, used bool) {
	l := pl.l
	if used && u != nil && !u.Estimated && !pl.predicted {
		l.learn(u, pl.prompt) // the usage ratio: of the calls whose cache reads were unknown
	}
	pl.settle(l.counted(u), used)
}

// release settles the lease once the attempt's outcome is known. used is false when the
// attempt failed or was canceled before the upstream counted it: its request and tokens
// are given back. Otherwise actualTokens, the usage the upstream reported (prompt plus
// output; 0 when unknown), is reconciled with the charge according to the key's
// Metering, until the upstream's headers calibrate the charge: they then show what the
// upstream counted instead. The parts, which cannot tell their share of actualTokens,
// keep their charges. The concurrency slot is always released. It must be called
// exactly once.
func (ls *limitLease) release(actualTokens int, used bool) {
	for i := range ls.more {
		ls.more[i].release(0, used)
	}
	l := ls.l
	if l == nil {
		return
	}
	if l.joint != nil && (!used || l.partHeld) { // else the parts keep their charges as they are
		for i := range l.parts {
			ls.parts[i].settle(0, used)
		}
	}
	ls.settle(actualTokens, used)
	ls.done()
}

// settle is release for one limiter's buckets (the lease's own, or a part's).
func (pl *partLease) settle(actualTokens int, used bool) {
	l := pl.l
	delta, requests := 0, 0
	switch {
	case !used:
		delta, requests = -pl.Tokens, -1
	case actualTokens > 0 && !l.sync.calibrated.Load():
		delta = actualTokens - pl.Tokens
		if l.metering == ratelimit.MeterAdmission {
			delta = max(delta, 0)
		}
	}
	if l.held || delta != 0 || requests != 0 {
		pl.adjust(requests, delta)
	}
}

// adjust is settle's change to the charge's buckets: requests and tokens taken (given
// back when negative), and the hold in flight ended.
func (pl *partLease) adjust(requests, delta int) {
	l := pl.l
	bg := context.Background()
	if l.held {
		_ = l.state.(limitstore.InFlightAdjuster).AdjustInFlight(bg, pl.Grant.Mark, pl.Tokens, requests, delta)
		if pl.batch && (delta != 0 || requests != 0) {
			_ = l.state.Adjust(bg, limitstore.LaneBatch, requests, delta)
		}
	} else if delta != 0 || requests != 0 {
		_ = l.state.Adjust(bg, limitstore.LaneMain, requests, delta)
		if pl.batch {
			_ = l.state.Adjust(bg, limitstore.LaneBatch, requests, delta)
		}
	}
}

// done counts the settled request out of the limiter and releases its slot: before the
// slot goes to a waiter, so InFlight never overstates.
func (ls *limitLease) done() {
	ls.l.inFlight.Add(-1)
	if ls.held {
		ls.l.slotState.ReleaseSlot(ls.slot)
	}
}

// pause stops admission on the scope until the given time, for every caller. It reports
// whether a shared store now holds the pause.
func (l *keyLimiter) pause(until time.Time) bool {
	if l == nil {
		return false
	}
	if d := time.Until(until); d > 0 {
		return l.state.Pause(context.Background(), d) == nil && l.shared
	}
	return false
}

// evict marks the scope's key out of use for d in a shared store, for every replica. It
// reports whether the store now holds the eviction.
func (l *keyLimiter) evict(d time.Duration) bool {
	if l != nil && l.shared && d > 0 {
		return l.state.Evict(context.Background(), d) == nil
	}
	return false
}

// InFlight returns the number of admitted requests whose lease is not yet released.
func (l *keyLimiter) InFlight() int {
	if l == nil {
		return 0
	}
	return int(l.inFlight.Load())
}

// admission sets *adm to what a's request asks of its key's limiter: its cost, split
// into the prompt estimate and the reserved output, its priority and the waits it
// accepts, and where to read the upstream's expected service time. A key that learned a
// token limit from its upstream's headers, in a Client whose configured limits need no
// estimates, estimates the request's cost here (a transport call's is only known when
// configured). It is written in place: the admission is large.
func (c *Client) admission(adm *admission, a *attempt, switchable bool) {
	lc := &c.cfg.limiter
	if a.cost == 0 && a.tx == nil && a.key.limiter().tokensLimited() {
		a.cost = lc.cost(a.req)
	}
	reserved := lc.output(a.req)
	out := 0
	if a.tx == nil || !a.tx.call.NoOutput {
		out = min(reserved, a.cost)
	}
	*adm = admission{prompt: a.cost - out, out: out, prio: a.req.Priority, switchable: switchable,
		within: a.within, svc: a.up.pool().service, streaming: a.streaming(), svcOut: reserved, model: a.call.Model}
	if qs := lc.scopes; qs != nil && qs.reads != nil && a.key.limiter().rule.CacheReadsFree && a.tx == nil {
		if a.reads == 0 {
			a.reads = affinityOf(a.req, readsPrefix)
		}
		a.readsEst = adm.prompt
		adm.cached, adm.cacheKnown = qs.reads.lookup(a.reads, time.Now())
	}
	if a.layerWait == 0 && a.key.source == nil {
		// Nothing waited since the attempt read the clock (a key source's fetch may
		// take long): the reservation is made at that reading.
		adm.now = a.begun
	}
}

// expectService sets adm.service, and adm.stale, from its upstream's service times while
// it is unknown (0), at the caller's reading of the clock when it has one.
func (adm *admission) expectService() {
	if adm.svc != nil && adm.service == 0 {
		now := adm.now
		if now.IsZero() {
			now = time.Now()
		}
		adm.service, adm.stale = adm.svc.expect(adm.streaming, adm.svcOut, now.UnixNano())
	}
}
