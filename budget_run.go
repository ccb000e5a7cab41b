package llmclient

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/pricing"
)

// budgetRun is one budget of a Client: its configuration, its ledger and the period it
// last computed. It is safe for concurrent use.
type budgetRun struct {
	b      budget.Budget
	bit    uint64 // the budget's bit in runBill.exempt
	ledger limitstore.Ledger
	// quick is ledger when it is kept in this process (limitstore.QuickLedger): the key
	// "" is reserved and settled through it.
	quick  limitstore.QuickLedger
	soft   []pricing.Money
	cached atomic.Pointer[cachedPeriod]
	// refusing are the keys whose last reservation the budget refused at its cap, for
	// Budget's Hard.
	refusing refusals
}

// refusals are the keys of a budget whose last reservation was refused at the cap, each
// with the epoch it was refused in. It is safe for concurrent use; admissions read one
// atomic while no key is refusing.
type refusals struct {
	n    atomic.Int32 // len(keys)
	mu   sync.Mutex
	keys map[string]int64
}

// maxRefusals bounds the keys kept refusing; beyond it they are forgotten, and Budget
// reports them Hard only when their window is full.
const maxRefusals = 4096

// refused notes that key's reservation was refused at the cap in epoch.
func (r *refusals) refused(key string, epoch int64) {
	r.mu.Lock()
	if r.keys == nil || len(r.keys) >= maxRefusals {
		r.keys = make(map[string]int64)
	}
	r.keys[key] = epoch
	r.n.Store(int32(len(r.keys)))
	r.mu.Unlock()
}

// admitted notes that key's reservation was taken under the cap.
func (r *refusals) admitted(key string) {
	if r.n.Load() == 0 {
		return
	}
	r.mu.Lock()
	delete(r.keys, key)
	r.n.Store(int32(len(r.keys)))
	r.mu.Unlock()
}

// at reports whether key's last reservation in epoch was refused.
func (r *refusals) at(key string, epoch int64) bool {
	if r.n.Load() == 0 {
		return false
	}
	r.mu.Lock()
	e, ok := r.keys[key]
	r.mu.Unlock()
	return ok && e == epoch
}

// cachedPeriod is a period and the span of time it holds for: a window's period changes
// only at the end of its current slice. It is immutable once published.
type cachedPeriod struct {
	p        budget.Period
	lp       limitstore.BudgetPeriod // the ledger's view of p, TTL unset
	from, to int64                   // Unix nanoseconds: valid for from <= now < to
	sliceEnd int64                   // Unix nanoseconds: when the current slice leaves the window
}

// at returns the ledger's view of the period at now (Unix nanoseconds, within the
// period): with the time the current slice has left in the window.
func (cp *cachedPeriod) at(now int64) limitstore.BudgetPeriod {
	lp := cp.lp
	lp.TTL = time.Duration(cp.sliceEnd - now) // within the period: no overflow
	return lp
}

// attemptBill is what an attempt's pricing keeps: the price and estimate it was
// admitted with, its budget reservations, what its outcome says about its cost, and the
// budget events to emit once it is recorded.
type attemptBill struct {
	price  *pricing.Model
	looked bool // price was looked up (it may still be nil)
	est    pricing.Money
	priced bool // est is known
	holds  [2]budgetHold
	nHolds int
	more   []budgetHold
	// status, partial and model are what the attempt's error said: an error response's
	// status, a filtered or empty answer's usage and model. model is also a stream's.
	status  int
	partial *Usage
	model   string
	// cost is the attempt's cost, set when it is settled.
	cost pricing.Cost
	// reroute is the budget that refused the attempt and moves the call to its group.
	reroute *budgetRun
	events  []budgetEvent
}

// budgetHold is one reservation in one budget.
type budgetHold struct {
	br     *budgetRun
	key    string
	cp     *cachedPeriod // the period it was taken in: its slice is cp.lp.Slice
	amount int64
}

// budgetEvent is an event.Budget to emit.
type budgetEvent struct {
	br       *budgetRun
	key      string
	p        budget.Period
	res      limitstore.BudgetResult
	fraction float64
	hard     bool
}

// runBill is what a call's pricing keeps across its attempts.
type runBill struct {
	// exempt has the bits of the budgets that rerouted the call: they admit its later
	// attempts past their cap.
	exempt uint64
	// first is the call's estimate on its first upstream, once computed.
	first                 pricing.Money
	firstKnown, firstDone bool
}

// newBudgetRuns opens the Client's budgets: in its limit store when that keeps budgets,
// else in ledgers of its own.
func (c *Client) newBudgetRuns() []*budgetRun {
	shared, _ := c.cfg.limiter.store.(limitstore.BudgetStore)
	out := make([]*budgetRun, 0, len(c.cfg.cost.budgets))
	for i, b := range c.cfg.cost.budgets {
		br := &budgetRun{b: b, bit: 1 << i, soft: b.Thresholds()}
		spec := limitstore.BudgetSpec{Cap: int64(b.Cap), Soft: make([]int64, len(br.soft))}
		for j, t := range br.soft {
			spec.Soft[j] = int64(t)
		}
		if shared != nil {
			br.ledger = shared.OpenBudget("budget:"+b.Name, spec)
		} else {
			br.ledger = limitstore.NewLedger(spec)
		}
		br.quick, _ = br.ledger.(limitstore.QuickLedger)
		out = append(out, br)
	}
	return out
}

// periodAt returns the budget's period at now, whose Unix nanoseconds are n: from the
// cache while now is within the cached period's current slice.
func (br *budgetRun) periodAt(now time.Time, n int64) *cachedPeriod {
	if cp := br.cached.Load(); cp != nil && n >= cp.from && n < cp.to {
		return cp
	}
	return br.newPeriod(now)
}

// newPeriod computes the budget's period at now and caches it.
func (br *budgetRun) newPeriod(now time.Time) *cachedPeriod {
	w := br.b.Window
	p := w.PeriodAt(now)
	cp := &cachedPeriod{p: p, sliceEnd: w.SliceEnd(p, p.Slice).UnixNano(), to: p.End.UnixNano(), from: p.Start.UnixNano(),
		lp: limitstore.BudgetPeriod{Slice: p.Slice, Oldest: p.Oldest, Epoch: p.Epoch}}
	if w.IsRolling() {
		cp.from = p.End.Add(-w.Length() / budget.Slices).UnixNano()
	}
	br.cached.Store(cp)
	return cp
}

// key returns the ledger key the budget counts the attempt under; ok is false when the
// budget does not count it.
func (br *budgetRun) key(a *attempt) (string, bool) {
	s := &br.b.Scope
	switch s.Kind {
	case budget.ScopeUpstream:
		return "", a.up.Name == s.Name
	case budget.ScopeModel:
		return "", a.call.Model == s.Name
	case budget.ScopePartition:
		name := ""
		if s.MetadataKey != "" {
			name = a.r.orig.Metadata[s.MetadataKey]
		} else {
			name = a.r.callPartition()
		}
		switch {
		case name == "":
			return "", false
		case s.Name != "":
			return "", name == s.Name
		}
		return name, true
	}
	return "", true
}

// callPartition is the call's caller partition, "" for none. It only reads the run: a
// hedge's attempt runs beside the call's other attempt.
func (r *run) callPartition() string {
	if r.c.partitions != nil || r.c.observer != nil {
		return r.partitionName // already known
	}
	return r.c.cfg.limiter.partitionOf(r.ctx, r.req)
}

// costLayer prices the attempt before its call: the context-window check, the cost
// bound on failover, and the budgets' reservations. After the call it keeps what the
// outcome says about the cost; attempt.settle prices it and reconciles the budgets. It
// sits between the breaker and the key pool, so an open breaker reserves nothing.
func (c *Client) costLayer(next attemptFunc) attemptFunc {
	cs := c.cost
	return func(ctx context.Context, a *attempt) error {
		if a.tx != nil && a.tx.unbudgeted() {
			return next(ctx, a) // a path the dialect does not know, passed uncounted (transport.go)
		}
		if e := cs.admit(ctx, a); e != nil {
			return e
		}
		err := next(ctx, a)
		if err != nil {
			a.bill.noteError(err)
		}
		return err
	}
}

// admit runs the checks of costLayer.
func (cs *costState) admit(ctx context.Context, a *attempt) *Error {
	r, b := a.r, &a.bill
	b.price, b.looked = cs.priceOf(a.up, a.call.Model), true
	in, out := r.estimate(a.req)
	if b.price != nil {
		// An embedding model's window bounds each input, not the batch: not checked.
		if w := b.price.ContextWindow(); w > 0 && r.emb == nil && satAdd(in, max(a.req.MaxTokens, 0)) > w {
			var e *Error
			if in, out, e = cs.fitWindow(ctx, a, w, in, out); e != nil {
				return e
			}
		}
		if len(cs.budgets) > 0 || len(cs.failover) > 0 { // only they read the estimate
			t := pricing.Tokens{Input: in, Output: out}
			if est, ok := b.price.FlatCost(t); ok { // Cost's answer, inlined (a.begun is set)
				b.est, b.priced = est, true
			} else if est, err := b.price.Cost(t, a.begun); err == nil {
				b.est, b.priced = est, true
			}
		}
	}
	if len(cs.failover) > 0 && a.up != r.first {
		if e := cs.checkFailover(a); e != nil {
			return e
		}
	}
	if len(cs.budgets) > 0 {
		return cs.reserve(ctx, a)
	}
	return nil
}

// fitWindow checks the attempt's request against its model's context window w, after
// WithContextTrim's hook has had a chance to shorten it, and returns the estimate of the
// request that goes.
func (cs *costState) fitWindow(ctx context.Context, a *attempt, w, in, out int) (int, int, *Error) {
	maxOut := max(a.req.MaxTokens, 0)
	need := satAdd(in, maxOut)
	if need <= w {
		return in, out, nil
	}
	if cs.trim != nil && a.tx == nil { // a transport call's body cannot be rewritten
		if short := cs.trim(ctx, a.req, max(w-maxOut, 0)); short != nil && short != a.req {
			a.req, a.call.Request = short, short
			in, out = a.r.estimate(short)
			maxOut = max(short.MaxTokens, 0)
			need = satAdd(in, maxOut)
			if a.r.c.needCost.Load() {
				a.cost = satAdd(in, out)
			}
		}
	}
	if need-w <= w/10 { // within the estimate's error: the upstream decides
		return in, out, nil
	}
	msg := "the request's estimate of " + strconv.Itoa(in) + " prompt tokens"
	if maxOut > 0 {
		msg += " and " + strconv.Itoa(maxOut) + " output tokens"
	}
	msg += " exceeds the context window of " + strconv.Itoa(w) + " tokens of " + a.bill.price.String()
	return in, out, &Error{Class: failure.ContextLength, Upstream: a.up.Name, Model: a.call.Model,
		Err: ErrContextWindow, Message: msg}
}

// checkFailover applies WithCostFailover to an attempt on another upstream than the
// call's first.
func (cs *costState) checkFailover(a *attempt) *Error {
	r := a.r
	f, ok := cs.failover[r.orig.Model]
	if !ok || r.c.group(r.orig.Model) == nil {
		if f, ok = cs.failover[""]; !ok {
			return nil
		}
	}
	if r.rerouteReached(a.up) {
		return nil
	}
	first, firstKnown := r.firstEstimate(cs, a.begun)
	b := &a.bill
	switch {
	case b.priced && firstKnown && f.Within(first, b.est):
		return nil
	case (!b.priced || !firstKnown) && f.AllowUnpriced:
		return nil
	case f.WhenOpen && !r.first.healthy(a.begun):
		return nil
	}
	msg := "upstream " + strconv.Quote(a.up.Name)
	switch {
	case !b.priced:
		msg += " has no price for the call"
	case !firstKnown:
		msg += ": the first upstream " + strconv.Quote(r.first.Name) + " has no price for the call"
	default:
		msg += " would cost " + b.est.String() + " for the call, more than " +
			strconv.FormatFloat(f.MaxRatio, 'g', -1, 64) + "× the " + first.String() + " of " + strconv.Quote(r.first.Name)
	}
	if f.WhenOpen {
		msg += ", whose breaker is closed"
	}
	return &Error{Class: failure.Unavailable, Upstream: a.up.Name, Model: a.call.Model, Err: budget.ErrCostlyFailover, Message: msg}
}

// rerouteReached reports whether up is one of the upstreams a reroute of the call brought
// in: a context or content fallback, or a budget's Reroute group. The run's reroute state
// is written only between attempts, so an attempt may read it.
func (r *run) rerouteReached(up *upstream) bool {
	for k, used := range r.rerouted {
		if used && contains(r.c.reroutes[k], up) {
			return true
		}
	}
	if r.bill.exempt != 0 {
		for _, br := range r.c.cost.budgets {
			if r.bill.exempt&br.bit != 0 && contains(r.c.group(br.b.Reroute), up) {
				return true
			}
		}
	}
	return false
}

func contains(ups []*upstream, up *upstream) bool {
	for _, u := range ups {
		if u == up {
			return true
		}
	}
	return false
}

// firstEstimate is the call's estimate on its first upstream, computed once.
func (r *run) firstEstimate(cs *costState, at time.Time) (pricing.Money, bool) {
	if !r.bill.firstDone {
		r.bill.firstDone = true
		model, ok := r.first.model(r.orig.Model)
		if !ok {
			model = r.orig.Model
		}
		if m := cs.priceOf(r.first, model); m != nil {
			in, out := r.estimate(r.req)
			if est, err := m.Cost(pricing.Tokens{Input: in, Output: out}, at); err == nil {
				r.bill.first, r.bill.firstKnown = est, true
			}
		}
	}
	return r.bill.first, r.bill.firstKnown
}

// reserve takes the attempt's reservation in every budget that counts it, or none.
func (cs *costState) reserve(ctx context.Context, a *attempt) *Error {
	b := &a.bill
	n := a.begun.UnixNano()
	if br := cs.solo; br != nil && b.priced && b.nHolds == 0 {
		// The loop below for the one client-wide budget of the Client, priced, when the
		// cached period holds and the reservation is taken; otherwise the loop, which
		// finds the same budget, period and amount (ReserveQuick refused took nothing).
		cp := br.cached.Load()
		if over := a.r.bill.exempt&br.bit != 0; cp != nil && n >= cp.from && n < cp.to && br.quick.ReserveQuick(cp.lp, int64(b.est), over) { // no TTL: see QuickLedger
			b.holds[0] = budgetHold{br: br, cp: cp, amount: int64(b.est)}
			b.nHolds = 1
			if !over {
				br.refusing.admitted("")
			}
			return nil
		}
	}
	for _, br := range cs.budgets {
		key, ok := "", true // a client-wide budget counts every attempt under ""
		if br.b.Scope.Kind != budget.ScopeClient {
			if key, ok = br.key(a); !ok {
				continue
			}
		}
		amount := b.est
		if !b.priced {
			switch {
			case br.b.Unpriced == budget.UnpricedCharge:
				amount = br.b.UnpricedCost
			case a.tx != nil && a.tx.modelUnread():
				// A priced shape whose model is known only from its answer: settle counts
				// the answer's cost. The least amount makes a budget at its cap refuse it.
				amount = pricing.Picodollar
			case br.b.Unpriced == budget.UnpricedAllow:
				continue
			default:
				cs.release(a)
				return &Error{Class: failure.Unpriced, Upstream: a.up.Name, Model: a.call.Model, Err: budget.ErrNoPrice,
					Message: "budget " + strconv.Quote(br.b.Name) + " cannot price model " + strconv.Quote(a.call.Model) +
						" on upstream " + strconv.Quote(a.up.Name) + " (price it with Upstream.Prices, or set the budget's Unpriced)"}
			}
		}
		cp := br.periodAt(a.begun, n)
		over := a.r.bill.exempt&br.bit != 0
		if key == "" && br.quick != nil && br.quick.ReserveQuick(cp.at(n), int64(amount), over) {
			b.hold(budgetHold{br: br, cp: cp, amount: int64(amount)})
			if !over {
				br.refusing.admitted(key)
			}
			continue
		}
		res, err := br.ledger.Reserve(ctx, key, cp.at(n), int64(amount), over)
		if err != nil {
			cs.release(a)
			return &Error{Class: failure.Unavailable, Upstream: a.up.Name, Model: a.call.Model, Err: err,
				Message: "budget " + strconv.Quote(br.b.Name) + " could not be checked"}
		}
		if !res.OK {
			cs.release(a)
			br.refusing.refused(key, cp.lp.Epoch)
			if res.FiredHard {
				b.events = append(b.events, budgetEvent{br: br, key: key, p: cp.p, res: res, fraction: 1, hard: true})
			}
			if br.b.Reroute != "" {
				b.reroute = br
			}
			return br.exceeded(a, key, cp.p, amount, res)
		}
		b.hold(budgetHold{br: br, key: key, cp: cp, amount: int64(amount)})
		if !over {
			br.refusing.admitted(key)
		}
	}
	return nil
}

// hold keeps a reservation taken.
func (b *attemptBill) hold(h budgetHold) {
	if b.nHolds < len(b.holds) {
		b.holds[b.nHolds] = h
		b.nHolds++
	} else {
		b.more = append(b.more, h)
	}
}

// exceeded is the error of an attempt the budget refused.
func (br *budgetRun) exceeded(a *attempt, key string, p budget.Period, amount pricing.Money, res limitstore.BudgetResult) *Error {
	e := &Error{Class: failure.BudgetExceeded, Upstream: a.up.Name, Model: a.call.Model, Err: budget.ErrExceeded}
	name := "budget " + strconv.Quote(br.b.Name)
	if key != "" {
		name += " of partition " + strconv.Quote(key)
	}
	e.Message = fmt.Sprintf("%s (%v, cap %v): %v spent and %v reserved; the attempt's estimate of %v does not fit",
		name, br.b.Window, br.b.Cap, pricing.Money(res.Spent), pricing.Money(res.Reserved), amount)
	if res.Never {
		e.Message = fmt.Sprintf("%s (%v): the attempt's estimate of %v exceeds the cap of %v", name, br.b.Window, amount, br.b.Cap)
	} else {
		e.AdmitAfter = max(br.b.Window.SliceEnd(p, res.FreeAfter).Sub(time.Now()), 0)
	}
	return e
}

// release gives back the attempt's reservations unused.
func (cs *costState) release(a *attempt) {
	b := &a.bill
	now := time.Now()
	n := now.UnixNano()
	for i := range b.nHolds {
		b.holds[i].release(now, n)
	}
	for i := range b.more {
		b.more[i].release(now, n)
	}
	b.nHolds, b.more = 0, nil
}

// release gives the reservation back unused.
func (h *budgetHold) release(now time.Time, n int64) {
	_, _ = h.br.ledger.Settle(context.Background(), h.key, h.br.periodAt(now, n).at(n), h.cp.lp.Slice, h.amount, 0)
}

// settle prices the ended attempt and replaces its reservations by its cost: the real
// one when known, else the reservation (an attempt the upstream may have billed without
// saying how much). Soft thresholds reached are kept for the attempt's record. It runs
// from attempt.settle and calls no hook.
func (cs *costState) settle(a *attempt, class failure.Class, usage *Usage) {
	b := &a.bill
	b.cost = cs.attemptCost(a, class, usage)
	if b.nHolds == 0 && len(b.more) == 0 {
		return
	}
	now := a.end // the attempt's end, just read by the layers below; a refusal has none
	if now.IsZero() {
		now = time.Now()
	}
	n := now.UnixNano()
	if h := &b.holds[0]; b.nHolds == 1 && b.more == nil && h.br == cs.solo && n >= h.cp.from && n < h.cp.to {
		// settleHold for the one hold of the Client's one client-wide budget, ended in the
		// period it was taken in: the same spend, period and ledger call.
		spent := int64(0)
		if a.called {
			spent = h.amount
			if b.cost.Known {
				spent = int64(b.cost.Amount)
			}
		}
		if res := h.br.quick.SettleQuick(h.cp.lp, h.cp.lp.Slice, h.amount, spent); res.Fired != 0 {
			b.fired(h, h.cp, res)
		}
		b.nHolds = 0
		return
	}
	for i := range b.nHolds {
		b.settleHold(&b.holds[i], a.called, now, n)
	}
	for i := range b.more {
		b.settleHold(&b.more[i], a.called, now, n)
	}
	b.nHolds, b.more = 0, nil
}

// settleHold replaces the reservation h by the attempt's cost, or by nothing when no call
// was made. Spend counts in the slice where it is settled, which is where it stays in the
// window longest: an attempt that ends in a later slice than it reserved in (a call
// longer than a slice, or than the whole window, whose reservation has then left it)
// counts its cost in the current slice first, then gives its reservation back, so that
// the ledger never holds less than the attempt between the two.
func (b *attemptBill) settleHold(h *budgetHold, called bool, now time.Time, n int64) {
	spent := int64(0)
	if called {
		spent = h.amount
		if b.cost.Known {
			spent = int64(b.cost.Amount)
		}
	}
	cp := h.cp // most attempts end in the period they began in
	if n < cp.from || n >= cp.to {
		cp = h.br.periodAt(now, n)
	}
	if cp.lp.Slice != h.cp.lp.Slice && spent > 0 {
		b.ledgerSettle(h, cp, n, cp.lp.Slice, 0, spent)
		spent = 0
	}
	b.ledgerSettle(h, cp, n, h.cp.lp.Slice, h.amount, spent)
}

// ledgerSettle settles reserved and spent in slice of h's ledger at period cp, and keeps
// the soft thresholds that reached.
func (b *attemptBill) ledgerSettle(h *budgetHold, cp *cachedPeriod, n, slice, reserved, spent int64) {
	var res limitstore.BudgetResult
	if h.key == "" && h.br.quick != nil {
		res = h.br.quick.SettleQuick(cp.at(n), slice, reserved, spent)
	} else {
		var err error
		if res, err = h.br.ledger.Settle(context.Background(), h.key, cp.at(n), slice, reserved, spent); err != nil {
			return
		}
	}
	if res.Fired != 0 {
		b.fired(h, cp, res)
	}
}

// fired keeps the events of the soft thresholds that settling h in period cp reached.
func (b *attemptBill) fired(h *budgetHold, cp *cachedPeriod, res limitstore.BudgetResult) {
	for i, t := range h.br.soft {
		if res.Fired&(1<<i) != 0 {
			b.events = append(b.events, budgetEvent{br: h.br, key: h.key, p: cp.p, res: res, fraction: h.br.b.FractionOf(t)})
		}
	}
}

// emitBudget tells the observer of the budget events of a recorded attempt.
func (r *run) emitBudget(a *attempt) {
	evs := a.bill.events
	a.bill.events = nil
	if r.c.observer == nil {
		return
	}
	for _, ev := range evs {
		st := &budget.Status{
			Name: ev.br.b.Name, Partition: ev.key, Cap: ev.br.b.Cap,
			Spent: pricing.Money(ev.res.Spent), Reserved: pricing.Money(ev.res.Reserved),
			Fraction: ev.fraction, Hard: ev.hard, Start: ev.p.Start, End: ev.p.End,
		}
		if ev.hard {
			st.Reroute = ev.br.b.Reroute
		}
		r.observe(Event{Kind: event.Budget, Upstream: a.up.Name, Model: a.call.Model, Attempt: a.number,
			Class: classOfBudgetEvent(ev.hard), Budget: st})
	}
}

func classOfBudgetEvent(hard bool) failure.Class {
	if hard {
		return failure.BudgetExceeded
	}
	return failure.None
}

// rerouteLocal continues a call whose attempt was refused locally by its pricing: on a
// budget's Reroute group (once per budget and call), or, for a request too large for its
// model's window, on WithContextFallback's upstreams, as a context_length error from the
// upstream would. ok is false when neither applies.
func (r *run) rerouteLocal(a *attempt, e *Error, d Decision) (plan, bool) {
	if br := a.bill.reroute; br != nil && r.bill.exempt&br.bit == 0 && r.extendRoute(r.c.group(br.b.Reroute)) {
		r.bill.exempt |= br.bit
		return plan{step: stepNext}, true
	}
	if e.Class == failure.ContextLength && errors.Is(e.Err, ErrContextWindow) {
		if k := d.reroute(&r.rerouted); k >= 0 && r.extendRoute(r.c.reroutes[k]) {
			r.rerouted[k] = true
			return plan{step: stepNext}, true
		}
	}
	return plan{}, false
}

// Budget returns the state of the budget called name in its current window: what it has
// spent and holds reserved, across every Client that shares its store; partition names
// the partition for a budget of each partition ("" otherwise). Hard is true while the
// budget refuses calls at its cap: this Client's last reservation under it in the
// window was refused, or the window's spend and reservations fill the cap (which also
// covers refusals by other Clients sharing the store); Fraction is then 1, else the
// largest soft fraction the window's spend has reached (0 for none). It reads the store
// (a round trip for redisstore) and reserves nothing. It fails for an unknown budget and
// with the store's error. It is safe for concurrent use.
func (c *Client) Budget(ctx context.Context, name, partition string) (budget.Status, error) {
	if c.cost != nil {
		for _, br := range c.cost.budgets {
			if br.b.Name != name {
				continue
			}
			now := time.Now()
			n := now.UnixNano()
			cp := br.periodAt(now, n)
			res, err := br.ledger.Reserve(ctx, partition, cp.at(n), 0, true)
			if err != nil {
				return budget.Status{}, err
			}
			st := budget.Status{Name: name, Partition: partition, Cap: br.b.Cap, Spent: pricing.Money(res.Spent),
				Reserved: pricing.Money(res.Reserved), Start: cp.p.Start, End: cp.p.End}
			st.Hard = br.refusing.at(partition, cp.lp.Epoch) || pricing.Money(res.Spent) >= br.b.Cap-min(pricing.Money(res.Reserved), br.b.Cap)
			if st.Hard {
				st.Fraction = 1
				st.Reroute = br.b.Reroute
			} else {
				for _, t := range br.soft {
					if st.Spent >= t {
						st.Fraction = br.b.FractionOf(t)
					}
				}
			}
			return st, nil
		}
	}
	return budget.Status{}, fmt.Errorf("llmclient: no budget %q", name)
}
