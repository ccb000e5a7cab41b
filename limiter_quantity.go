package llmclient

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/ratelimit"
)

// Quotas as vendors meter them. A key's limiter (keyLimiter) enforces its requests and
// total tokens (Limits.RPM, TPM) on its own state; each further quantity a vendor meters
// apart — input tokens (Limits.ITPM), output tokens (Limits.OTPM) — is a part: a limiter
// of its own on a state of its own (the store scope "<key scope>/in" or "/out"), with only
// a token bucket, charged its own cost and reconciled with its own share of the usage,
// which learns its window and level from its own headers
// (anthropic-ratelimit-input-tokens-*, -output-tokens-*). The key's state and its parts'
// are reserved together (limitstore.Joint): in memory in one step, under the one lock the
// parts' states share with the key's (limitstore.OpenBeside), at one admission time for
// all or not at all; the charges of the parts are held in the key's lease, so admission
// allocates nothing. A quota scope (QuotaScope) is a limiter, with its own parts, shared
// by every key of the upstreams that name it, for the requests whose model it covers. A
// request is admitted by the key's limiter, then by each scope in turn, each wait counted
// against the same deadline; a refusal anywhere gives back what the others took.

// quantity is what a limiter's token buckets meter.
type quantity uint8

const (
	qtyTotal  quantity = iota // prompt and output together (Limits.TPM)
	qtyInput                  // input tokens (Limits.ITPM)
	qtyOutput                 // output tokens (Limits.OTPM)
)

// ruleOf returns p's ratelimit.Rule, the zero one when it does not say.
func ruleOf(p Provider) ratelimit.Rule {
	if r, ok := p.(ratelimit.Ruler); ok {
		return r.QuotaRule()
	}
	return ratelimit.Rule{}
}

// QuotaScope is a quota shared above the key: by every key of the upstreams that name it
// in Upstream.QuotaScopes (the keys of one Gemini project add no capacity), and by every
// model it covers (Anthropic's limits for a model class, such as every Opus 4.x version,
// are one total). Declare it once with WithQuotaScope. It is enforced besides each key's
// own Limits, with the ratelimit.Rule of the first upstream that names it; in a store
// (WithLimitStore) its state is the scope "quota:<Name>", shared by every replica.
type QuotaScope struct {
	// Name identifies the scope in Upstream.QuotaScopes. Required, unique; it must not
	// contain an API key.
	Name string
	// Limits are the scope's (RPM, TPM, ITPM, OTPM, RPD, TPD, MaxConcurrent, bursts).
	Limits Limits
	// Models are the upstream model names (after Upstream.Models) the scope covers: an
	// exact name, or a prefix ending in "*" ("claude-opus-4*"). Empty: every model.
	Models []string
}

// covers reports whether the scope covers the upstream model m.
func covers(models []string, m string) bool {
	if len(models) == 0 {
		return true
	}
	for _, p := range models {
		if pre, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(m, pre) || p == m {
			return true
		}
	}
	return false
}

// WithQuotaScope declares a quota scope that upstreams name in Upstream.QuotaScopes (see
// QuotaScope). Default: none. A scope that no upstream names limits nothing; an upstream
// naming an undeclared scope, an empty or repeated name, an empty model pattern or
// invalid Limits make New fail.
func WithQuotaScope(s QuotaScope) Option {
	return optionFunc(func(c *config) {
		s.Models = append([]string(nil), s.Models...)
		c.limiter.scopeDecls = append(c.limiter.scopeDecls, s)
	})
}

// quotaScopes is a Client's quota scopes, each limiter made on first use.
type quotaScopes struct {
	mu   sync.Mutex
	lims map[string]*keyLimiter
	// rules and refs are each upstream's ratelimit.Rule and the scopes it names, by upstream
	// name (set by New's validation).
	rules map[string]ratelimit.Rule
	refs  map[string][]string
	// reads are the prefixes of the calls to upstreams whose cache reads are free
	// (limiter_reads.go); nil when no upstream's are.
	reads *cacheReads
}

// validateQuota checks the quota scopes and the upstreams' references to them, and
// records each upstream's rule and scopes for its keys' limiters.
func (c *config) validateQuota() []error {
	var errs []error
	lc := &c.limiter
	decl := map[string]bool{}
	for _, s := range lc.scopeDecls {
		switch {
		case s.Name == "":
			errs = append(errs, errors.New("quota scope: empty name"))
		case decl[s.Name]:
			errs = append(errs, fmt.Errorf("quota scope %q: declared twice", s.Name))
		}
		decl[s.Name] = true
		if err := s.Limits.validate(); err != nil {
			errs = append(errs, fmt.Errorf("quota scope %q: %w", s.Name, err))
		}
		for _, m := range s.Models {
			if m == "" || m == "*" && len(s.Models) > 1 {
				errs = append(errs, fmt.Errorf("quota scope %q: empty model pattern", s.Name))
			}
		}
	}
	qs := &quotaScopes{lims: map[string]*keyLimiter{}, rules: map[string]ratelimit.Rule{}, refs: map[string][]string{}}
	for i := range c.upstreams {
		u := &c.upstreams[i]
		if u.Provider != nil {
			qs.rules[u.Name] = ruleOf(u.Provider)
			if qs.rules[u.Name].CacheReadsFree && qs.reads == nil {
				qs.reads = &cacheReads{}
			}
		}
		seen := map[string]bool{}
		for _, n := range u.QuotaScopes {
			switch {
			case !decl[n]:
				errs = append(errs, fmt.Errorf("upstream %q: unknown quota scope %q (declare it with WithQuotaScope)", u.Name, n))
			case seen[n]:
				errs = append(errs, fmt.Errorf("upstream %q: quota scope %q named twice", u.Name, n))
			}
			seen[n] = true
		}
		qs.refs[u.Name] = append([]string(nil), u.QuotaScopes...)
	}
	lc.scopes = qs
	return errs
}

// scope returns the limiter of the declared scope name, made on first use with rule.
func (c *limiterConfig) scope(name string, rule ratelimit.Rule) *keyLimiter {
	qs := c.scopes
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if l, ok := qs.lims[name]; ok {
		return l
	}
	for _, d := range c.scopeDecls {
		if d.Name == name {
			l := newScopeLimiter("quota:"+name, d.Limits, c)
			c.withParts(l, "quota:"+name, d.Limits, rule)
			l.sync.cfg.scope = true
			for _, p := range l.parts {
				p.sync.cfg.scope = true
			}
			l.models = d.Models
			l.refresh()
			qs.lims[name] = l
			return l
		}
	}
	return nil
}

// newKeyLimiterOf returns the limiter of a key of the named upstream whose state is the
// store scope name: its Limits, its parts and the quota scopes the upstream names.
func newKeyLimiterOf(upstream, name string, l Limits, c *limiterConfig) *keyLimiter {
	k := newScopeLimiter(name, l, c)
	c.attach(k, upstream, name, l, nil)
	return k
}

// retunedKeyLimiterOf is newKeyLimiterOf on cur's state, retuned to l: its parts keep
// their states, retuned too. Its slots stay cur's unless newSlots, which gives a private
// state slots of its own for l.MaxConcurrent (a state cannot retune its slot limit), its
// buckets staying where they were.
func retunedKeyLimiterOf(upstream string, cur *keyLimiter, l Limits, c *limiterConfig, newSlots bool) *keyLimiter {
	k := limiterOn(cur.state, cur.shared, l, c)
	k.slotState = cur.slotState
	if newSlots && !cur.shared {
		k.slotState = limitstore.NewState(limitstore.Spec{MaxConcurrent: l.MaxConcurrent, BatchShare: c.batchShare})
	}
	c.attach(k, upstream, "", l, cur)
	return k
}

// attach gives the key limiter k its parts and its upstream's scopes. With old, the parts
// retune old's states instead of opening new ones.
func (c *limiterConfig) attach(k *keyLimiter, upstream, name string, l Limits, old *keyLimiter) {
	var rule ratelimit.Rule
	var refs []string
	if qs := c.scopes; qs != nil {
		rule, refs = qs.rules[upstream], qs.refs[upstream]
	}
	if old != nil {
		c.retuneParts(k, old, l, rule)
	} else {
		c.withParts(k, name, l, rule)
	}
	if c.scopes != nil {
		for _, n := range refs {
			if s := c.scope(n, rule); s != nil {
				k.scopes = append(k.scopes, s)
			}
		}
	}
	k.refresh()
}

// partLimits returns the Limits of k's part for the quantity q of l, zero when l does not
// limit it.
func partLimits(q quantity, l Limits, rule ratelimit.Rule) Limits {
	var tpm int
	switch q {
	case qtyInput:
		tpm = l.ITPM
	case qtyOutput:
		tpm = l.OTPM
	}
	if tpm <= 0 {
		return Limits{}
	}
	m := l.Metering
	if q == qtyOutput {
		m = ratelimit.MeterAdmission
		if rule.OutputOnUsage {
			m = ratelimit.MeterUsage // its charge is an expectation: reconciled both ways
		}
	}
	return Limits{TPM: tpm, Metering: m}
}

// outSpread is how many standard deviations of the share of its reservation a request's
// output uses are charged above its mean, for an output quantity counted on usage: the
// upstream counts each call's output when the call ends, so the charge paces the
// admissions by the expected output, and the spread keeps a reserve against calls that
// use more of their max_tokens than usual.
const outSpread = 0.5

// partSuffix is the store scope suffix of a part's state.
var partSuffix = [...]string{qtyInput: "/in", qtyOutput: "/out"}

// withParts gives k, the limiter of the store scope name ("" for a private one), a part
// for each quantity of l apart from its total (ITPM, OTPM), and rule.
func (c *limiterConfig) withParts(k *keyLimiter, name string, l Limits, rule ratelimit.Rule) {
	k.rule = rule
	for _, q := range [...]quantity{qtyInput, qtyOutput} {
		pl := partLimits(q, l, rule)
		if pl.zero() {
			continue
		}
		pname := ""
		if name != "" {
			pname = name + partSuffix[q]
		}
		spec := pl.spec(c)
		p := limiterOn(limitstore.OpenBeside(c.store, pname, spec, k.state), c.store != nil && pname != "", pl, c)
		p.setRule(q, rule)
		k.parts = append(k.parts, p)
	}
	k.sync.cfg.noisy = rule.CacheReadsFree
}

// retuneParts gives k the parts of l, retuning the states of old's parts of the same
// quantities (a part l no longer sets is dropped; one it newly sets starts on a private
// state, or its store scope when old's state is shared).
func (c *limiterConfig) retuneParts(k *keyLimiter, old *keyLimiter, l Limits, rule ratelimit.Rule) {
	k.rule = rule
	for _, q := range [...]quantity{qtyInput, qtyOutput} {
		pl := partLimits(q, l, rule)
		if pl.zero() {
			continue
		}
		var p *keyLimiter
		for _, op := range old.parts {
			if op.qty == q {
				_ = op.state.Retune(context.Background(), pl.spec(c))
				p = limiterOn(op.state, op.shared, pl, c)
			}
		}
		if p == nil {
			p = limiterOn(limitstore.OpenBeside(c.store, "", pl.spec(c), k.state), false, pl, c)
		}
		p.setRule(q, rule)
		k.parts = append(k.parts, p)
	}
}

// setRule makes the part p meter the quantity q as rule says. An output quantity that
// the vendor counts as generated holds its charges in flight until the request ends,
// where the state can (limitstore.InFlightAdjuster): its bucket then refills as the
// vendor's, which gets no refill while full, even with output in flight.
func (p *keyLimiter) setRule(q quantity, rule ratelimit.Rule) {
	p.qty, p.rule = q, rule
	p.sync.cfg.noisy = q == qtyInput && rule.CacheReadsFree
	if q == qtyOutput && rule.OutputOnUsage {
		p.sync.cfg.spread = outSpread
		_, p.held = p.state.(limitstore.InFlightAdjuster)
	}
}

// refresh records what k's parts and scopes ask of its admissions.
func (k *keyLimiter) refresh() {
	k.extra = len(k.parts)+len(k.scopes) > 0
	k.joint = nil
	if len(k.parts) > 0 {
		states := []limitstore.State{k.state}
		for _, p := range k.parts {
			states = append(states, p.state)
		}
		k.joint = limitstore.NewJoint(states...)
	}
	k.partHeld = false
	for _, p := range k.parts {
		k.hideInput = k.hideInput || p.qty == qtyInput
		k.partHeld = k.partHeld || p.held
	}
	for _, s := range k.scopes {
		for _, p := range s.parts {
			k.hideInput = k.hideInput || p.qty == qtyInput
		}
	}
	if k.extra {
		k.limited.Store(true)
	}
}

// costOf is the prompt and the output of adm that k's buckets are charged (see
// headerSync.estimate).
func (k *keyLimiter) costOf(adm *admission) (prompt, out int) {
	prompt, out = max(adm.prompt, 0), max(adm.out, 0)
	if k.predicts(adm) {
		prompt = max(prompt-adm.cached, 0) // read from the cache: not counted
	}
	switch {
	case k.qty == qtyInput:
		return prompt, 0
	case k.qty == qtyOutput && k.rule.OutputOnUsage:
		return out, 0 // an expectation: scaled by the learned share of the reservation used
	case k.qty == qtyOutput:
		return 0, out
	case k.rule.InputOnly:
		return prompt, 0
	}
	return prompt, out
}

// predicts reports whether k charges adm's prompt as predicted from the cache reads of
// an earlier call with its prefix (limiter_reads.go): k's vendor does not count cache
// reads against the quantity k meters, and the prefix is known.
func (k *keyLimiter) predicts(adm *admission) bool {
	return adm.cacheKnown && k.rule.CacheReadsFree && k.qty != qtyOutput
}

// counted is what the upstream counted of u against k's buckets, 0 when unknown: the
// input (less cache reads where they are free) and the output, as k's quantity meters.
func (k *keyLimiter) counted(u *Usage) int {
	if u == nil || u.Estimated {
		return 0
	}
	in := k.input(u)
	out := max(u.OutputTokens, 0)
	switch {
	case k.qty == qtyInput || k.qty == qtyTotal && k.rule.InputOnly:
		return in
	case k.qty == qtyOutput:
		return out
	}
	return satAdd(in, out)
}

// input is the input of u that counts: all of it, less the cache reads where the rule
// says they are free.
func (k *keyLimiter) input(u *Usage) int {
	in := max(u.InputTokens, 0)
	if k.rule.CacheReadsFree {
		in -= min(max(u.CachedInputTokens, 0), in)
	}
	return in
}

// learn feeds u to the usage ratio of k's charges: where k does not count all of a
// prompt's input, the share it counts (less than 1 where cache reads are free); for an
// output quantity counted on usage, the share of the reserved output (reserved: the
// request's max_tokens or WithReservedOutput) the call generated. The tokenizer's part of
// the error is the model family's calibration (family.go), already in the estimate.
func (k *keyLimiter) learn(u *Usage, reserved int) {
	switch {
	case k.qty == qtyOutput && k.rule.OutputOnUsage:
		k.sync.usage(reserved, max(u.OutputTokens, 0))
	case k.qty != qtyOutput && k.rule.CacheReadsFree:
		k.sync.usage(max(u.InputTokens, 0), k.input(u))
	}
}

// view is the part of rl that k's buckets meter: the requests and tokens windows for a
// key (the input-token window standing for the tokens one only when no part meters
// input), the input or the output window for a part. An output quantity metered on usage
// takes no window: the level the headers report lags the output in flight.
func (k *keyLimiter) view(rl *ratelimit.Status) ratelimit.Status {
	switch k.qty {
	case qtyInput:
		return ratelimit.Status{Tokens: rl.InputTokens}
	case qtyOutput:
		if k.rule.OutputOnUsage {
			if k.held {
				k.learnVendorBurst(rl.OutputTokens)
			}
			return ratelimit.Status{}
		}
		return ratelimit.Status{Tokens: rl.OutputTokens}
	}
	v := *rl
	if k.hideInput {
		v.InputTokens = ratelimit.Window{}
	}
	return v
}

// admitScopes admits the request of adm, which l admitted into ls with the wait waited
// (not slept: adm.noSleep), against the scopes of l that cover its model, in turn, and
// returns the longest of their waits. On failure it gives back what l and the scopes took
// and leaves ls the zero lease.
func (l *keyLimiter) admitScopes(ctx context.Context, adm *admission, ls *limitLease, waited time.Duration) (time.Duration, error) {
	more := make([]limitLease, len(l.scopes))
	for i, s := range l.scopes {
		if !covers(s.models, adm.model) {
			continue
		}
		adm.haveLim0 = false
		w, err := s.admitFrom(ctx, adm, &more[i], 0)
		if err != nil {
			for j := range i {
				more[j].release(0, false)
			}
			ls.release(0, false)
			*ls = limitLease{}
			return 0, err
		}
		waited = max(waited, w)
	}
	ls.more = more
	return waited, nil
}

// admitFrom admits adm on l (with its parts) and its scopes, after waited, into ls (the
// zero lease on failure), and returns the wait so far.
func (l *keyLimiter) admitFrom(ctx context.Context, adm *admission, ls *limitLease, waited time.Duration) (time.Duration, error) {
	if !l.limited.Load() {
		*ls = limitLease{}
		return waited, nil
	}
	w, err := l.admit(ctx, adm, ls, waited)
	if err != nil || len(l.scopes) == 0 {
		return w, err
	}
	return l.admitScopes(ctx, adm, ls, w)
}

// learnVendorBurst learns the size of the vendor's output bucket from its window: the
// level it reports plus what its reset refills (see window.learn), which a held part's
// state takes for the vendor's burst (limitstore.Reservation.VendorBurst).
func (k *keyLimiter) learnVendorBurst(rw ratelimit.Window) {
	if !rw.Known || rw.Limit <= 0 {
		return
	}
	var w window
	w.learn(rw)
	if w.known && !w.long {
		k.vendorBurst.Store(math.Float64bits(w.capacity))
	}
}
