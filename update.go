package llmclient

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/keysource"
)

// Change is one live change for Client.Update, made by SetLimits, SetKeys, SetKeySources,
// SetTimeout, SetWeight or SetGroup.
type Change struct {
	upstream string // the upstream changed; "" for a group change
	group    string
	apply    func(*pendingUpdate)
}

// pendingUpdate is what an Update will set, per upstream and group, once every change is
// validated.
type pendingUpdate struct {
	ups     map[string]*Upstream // the upstream's settings after the update
	groups  map[string][]string  // the groups after the update (a copy)
	touched map[string]bool      // upstreams whose keys or limits change
	sources map[string]bool      // upstreams whose key sources SetKeySources sets
	regroup bool                 // some group changes
}

// SetLimits replaces the whole Limits of every key of the upstream: a field left zero
// removes that limit (SetLimits(u, Limits{RPM: 100}) also removes TPM and MaxConcurrent).
// To change some fields and keep the others, use PatchLimits. Each key keeps its cooldown
// or eviction and its calls in flight, a key source's key its cached credential too; its
// limiter is retuned (see Update).
func SetLimits(upstream string, l Limits) Change {
	return Change{upstream: upstream, apply: func(p *pendingUpdate) {
		p.ups[upstream].Limits = l
		p.touched[upstream] = true
	}}
}

// PatchLimits changes only the fields of the upstream's Limits that l sets: each field of
// l that is not zero replaces the upstream's, each zero field keeps the upstream's value
// (PatchLimits(u, Limits{RPM: 100}) lowers RPM and keeps TPM, MaxConcurrent and the
// rest). A field cannot be set back to zero (no limit, or ratelimit.MeterAdmission) this way: use
// SetLimits with the whole Limits. Changes apply in order, so several PatchLimits of one
// upstream in one Update combine. The result is checked as New checks Limits (no negative
// field, no burst above its rate); MaxInt is accepted and limits nothing in practice.
func PatchLimits(upstream string, l Limits) Change {
	return Change{upstream: upstream, apply: func(p *pendingUpdate) {
		cur := &p.ups[upstream].Limits
		for _, f := range [...]struct{ to, from *int }{{&cur.RPM, &l.RPM}, {&cur.TPM, &l.TPM}, {&cur.ITPM, &l.ITPM}, {&cur.OTPM, &l.OTPM}, {&cur.RPD, &l.RPD},
			{&cur.TPD, &l.TPD}, {&cur.MaxConcurrent, &l.MaxConcurrent}, {&cur.RequestBurst, &l.RequestBurst},
			{&cur.TokenBurst, &l.TokenBurst}} {
			if *f.from != 0 {
				*f.to = *f.from
			}
		}
		if l.Metering != 0 {
			cur.Metering = l.Metering
		}
		p.touched[upstream] = true
	}}
}

// SetKeys replaces the upstream's static keys. A key already in the pool keeps its label,
// cooldown, eviction and limiter state; a new key gets a label never used before in the
// upstream's pool (a removed key's label is not reused, so no two secrets ever share
// one); a removed key finishes the calls it has in flight and takes no new ones. The
// upstream's key sources stay. Keys must not be empty strings, and an Update that leaves
// an upstream with keys or key sources with neither is refused (its calls would go out
// with no credential); an upstream created with neither keeps its adapter's own key.
func SetKeys(upstream string, keys ...string) Change {
	keys = slices.Clone(keys)
	return Change{upstream: upstream, apply: func(p *pendingUpdate) {
		p.ups[upstream].Keys = keys
		p.touched[upstream] = true
	}}
}

// SetKeySources replaces the upstream's key sources: a source already in the pool keeps
// its key (its label, cached credential, cooldown, eviction and limiter), each new source
// is a new key of the pool (with a label never used before in the pool), whose credential
// is fetched on its first call, and the removed ones finish their calls in flight. The
// static keys stay. As with SetKeys, an Update that leaves the upstream with no key at
// all is refused.
//
// A source is already in the pool when it is the same source value: an equal value of a
// comparable type (the same pointer, most often), or for a keysource.Func, or another
// func type, the same function value passed again. Two closures are two sources even of
// the same code (each captures its own variables), and so are two evaluations of a method
// value (src.Key): pass the Func value the pool was given to keep its key. The keys of one
// source call it one at a time, a removed key still fetching included. A value of a type
// that cannot be compared (a struct holding a func or a slice) is always a new source,
// which its replaced key may still be calling, and two such values listed are two
// sources: pass a pointer to it instead.
//
// With a shared store (WithLimitStore), a source's limiter state there is that of its
// position in the list, as in every replica that lists the same sources: a kept source
// that moves in the list takes the state of its new position (what it owed stays with
// the old one). Without a store, its limiter stays.
func SetKeySources(upstream string, sources ...keysource.Source) Change {
	sources = slices.Clone(sources)
	return Change{upstream: upstream, apply: func(p *pendingUpdate) {
		p.ups[upstream].KeySources = sources
		p.touched[upstream], p.sources[upstream] = true, true
	}}
}

// SetTimeout replaces the upstream's attempt timeout (Upstream.Timeout; 0 uses
// WithAttemptTimeout's value). It must not be negative.
func SetTimeout(upstream string, d time.Duration) Change {
	return Change{upstream: upstream, apply: func(p *pendingUpdate) { p.ups[upstream].Timeout = d }}
}

// SetWeight replaces the upstream's routing weight (Upstream.Weight). It must not be
// negative.
func SetWeight(upstream string, w int) Change {
	return Change{upstream: upstream, apply: func(p *pendingUpdate) { p.ups[upstream].Weight = w }}
}

// SetGroup replaces the members of a model group registered with WithModelGroup, in
// order. Its fallback groups (WithGroupFallback), routing and hedging stay.
func SetGroup(group string, upstreams ...string) Change {
	upstreams = slices.Clone(upstreams)
	return Change{group: group, apply: func(p *pendingUpdate) { p.groups[group], p.regroup = upstreams, true }}
}

// Update applies changes while calls are in flight: all of them or, when any is invalid
// (an unknown upstream or group, a value New would refuse, an upstream left with no key),
// none, with an error that names each problem. Changes apply in order: a later change of
// the same setting wins. An applied Update is announced by one event.Control with Action
// "update" whose Changed names each setting that took a new value ("<upstream>.Keys",
// "<upstream>.KeySources", "<upstream>.Limits.RPM" and the other Limits fields,
// "<upstream>.Timeout", "<upstream>.Weight", "group:<name>"), never a key's value. Attempts that begin after Update returns use the new settings;
// attempts under way finish with what they began with. What a change does not touch keeps
// its state: breakers, retry budgets, latency statistics, and each remaining key's
// cooldown, eviction and limiter. An upstream's key sources change only by SetKeySources:
// SetLimits, PatchLimits and SetKeys keep every source's key as it is (its label, cached
// credential, cooldown, eviction and limiter), and do not name "<upstream>.KeySources".
//
// A limits change retunes each key's limiter state: what its buckets owe stays owed, and
// with a shared store (WithLimitStore) every Client sharing the key enforces the new
// limits from then on. What the limiter learned from the upstream's headers starts over.
// A change of MaxConcurrent gives a private state new slots (all free), where the calls
// waiting for one of the old ones then wait, its buckets keeping what they owe, and
// leaves a shared scope's slot limit as it was. Update is safe for concurrent use;
// updates are applied one at a time.
func (c *Client) Update(changes ...Change) error {
	c.updateMu.Lock()
	defer c.updateMu.Unlock()
	p := &pendingUpdate{ups: map[string]*Upstream{}, groups: map[string][]string{}, touched: map[string]bool{}, sources: map[string]bool{}}
	for g, m := range c.cfg.groups {
		p.groups[g] = m
	}
	var errs []error
	for i, ch := range changes {
		switch {
		case ch.apply == nil:
			errs = append(errs, fmt.Errorf("change %d: not made by a Set function", i+1))
			continue
		case ch.group != "":
			if _, ok := c.cfg.groups[ch.group]; !ok {
				errs = append(errs, fmt.Errorf("change %d: unknown model group %q", i+1, ch.group))
				continue
			}
		default:
			up := c.byName[ch.upstream]
			if up == nil {
				errs = append(errs, fmt.Errorf("change %d: unknown upstream %q", i+1, ch.upstream))
				continue
			}
			if p.ups[ch.upstream] == nil {
				cur := up.current()
				p.ups[ch.upstream] = &cur
			}
		}
		ch.apply(p)
	}
	for name, u := range p.ups {
		errs = append(errs, u.validateTunables()...)
		if p.touched[name] && len(u.Keys) == 0 && len(u.KeySources) == 0 && !c.byName[name].pool().adapterKey() {
			errs = append(errs, fmt.Errorf("upstream %q: no keys and no key sources left (its calls would have no credential)", name))
		}
	}
	for g, members := range p.groups {
		if !p.regroup {
			break
		}
		if len(members) == 0 {
			errs = append(errs, fmt.Errorf("model group %q is empty", g))
		}
		for _, n := range members {
			if c.byName[n] == nil {
				errs = append(errs, fmt.Errorf("model group %q names unknown upstream %q", g, n))
			}
		}
		if !slices.Equal(members, c.cfg.groups[g]) {
			errs = append(errs, c.cfg.checkGroupServed(g, members)...)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("llmclient: update refused, nothing changed: %w", errors.Join(errs...))
	}
	changed := p.changes(c)
	for name, u := range p.ups {
		up := c.byName[name]
		if p.touched[name] {
			if u.Limits.meterTokens() {
				c.needCost.Store(true)
			}
			var sources []keysource.Source // nil: the pool's sources stay as they are
			if p.sources[name] {
				sources = u.KeySources
			}
			up.keys.Store(up.pool().update(name, u.Keys, sources, p.sources[name], u.Limits, &c.cfg.limiter))
		}
		up.setTunables(*u, c.cfg.attemptTimeout)
		up.settings.Store(u)
	}
	if p.regroup {
		c.cfg.groups = p.groups
		c.groups.Store(c.resolveGroups(p.groups))
	}
	c.observe(Event{Kind: event.Control, Action: actionUpdate, Changed: changed})
	return nil
}

// changes names each setting p changes, for event.Control.Changed: by upstream name, then
// the groups by name.
func (p *pendingUpdate) changes(c *Client) []string {
	var out []string
	names := make([]string, 0, len(p.ups))
	for name := range p.ups {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		was, now := c.byName[name].current(), p.ups[name]
		if !slices.Equal(was.Keys, now.Keys) {
			out = append(out, name+".Keys")
		}
		if p.sources[name] && !slices.EqualFunc(was.KeySources, now.KeySources, sameSource) {
			out = append(out, name+".KeySources")
		}
		wl, nl := reflect.ValueOf(was.Limits), reflect.ValueOf(now.Limits)
		for i := range wl.NumField() {
			if !wl.Field(i).Equal(nl.Field(i)) {
				out = append(out, name+".Limits."+wl.Type().Field(i).Name)
			}
		}
		if was.Timeout != now.Timeout {
			out = append(out, name+".Timeout")
		}
		if was.Weight != now.Weight {
			out = append(out, name+".Weight")
		}
	}
	if p.regroup {
		groups := make([]string, 0, len(p.groups))
		for g := range p.groups {
			groups = append(groups, g)
		}
		slices.Sort(groups)
		for _, g := range groups {
			if !slices.Equal(c.cfg.groups[g], p.groups[g]) {
				out = append(out, "group:"+g)
			}
		}
	}
	return out
}

// adapterKey reports whether the pool is the adapter's own key alone (an upstream
// created with no keys and no key sources).
func (p *keyPool) adapterKey() bool { return len(p.keys) == 1 && p.keys[0].label == "" }

// current returns the upstream's settings as Update last left them.
func (up *upstream) current() Upstream {
	if u := up.settings.Load(); u != nil {
		return *u
	}
	return up.Upstream
}

// update returns the pool after a change of its keys, key sources or limits. Kept keys
// are the same poolKeys (their cooldowns, evictions and calls in flight go on); a limits
// change retunes each key's limiter (see retune). Unless setSources, the pool's source
// keys all stay as they are and sources is ignored.
func (p *keyPool) update(upstream string, secrets []string, sources []keysource.Source, setSources bool, limits Limits, lc *limiterConfig) *keyPool {
	retune := limits != p.limits
	var old []*poolKey // the pool's source keys, in the order of its sources
	for _, k := range p.keys {
		if k.source != nil {
			old = append(old, k)
		}
	}
	if !setSources && len(old) > 0 {
		sources = make([]keysource.Source, len(old))
		for i, k := range old {
			sources[i] = k.source.src
		}
	}
	if len(secrets) == 0 && len(sources) == 0 {
		if len(p.keys) == 1 && p.keys[0].label == "" { // the adapter's own key stays
			if retune {
				p.keys[0].retune(upstream, p.limits, limits, lc)
			}
			return &keyPool{keys: p.keys, limits: limits, service: p.service, retired: p.stillBusy(p.keys)}
		}
		np := newKeyPool(upstream, nil, nil, limits, lc)
		np.service, np.retired = p.service, p.stillBusy(nil)
		return np
	}
	next := &keyPool{limits: limits, service: p.service}
	byValue := map[string]*poolKey{}
	label := p.lastLabel // the highest label number ever given in the pool
	for _, k := range p.keys {
		if k.source == nil && k.secret != "" {
			byValue[k.secret] = k
		}
	}
	for _, k := range slices.Concat(p.keys, p.retired) {
		if n, err := strconv.Atoi(strings.TrimPrefix(k.label, "key#")); err == nil {
			label = max(label, n)
		}
	}
	defer func() { next.lastLabel = label }()
	keep := func(k *poolKey) {
		if retune {
			k.retune(upstream, p.limits, limits, lc)
		}
		next.keys = append(next.keys, k)
	}
	for _, s := range secrets {
		if k := byValue[s]; k != nil {
			delete(byValue, s) // a key listed twice is pooled once
			keep(k)
			continue
		}
		if slices.ContainsFunc(next.keys, func(k *poolKey) bool { return k.secret == s }) {
			continue
		}
		label++
		next.keys = append(next.keys, newStaticKey(upstream, s, label, limits, lc))
	}
	// Sources the change does not set keep their keys. Of a list SetKeySources sets, each
	// source the pool has (see sameSource) keeps its key, the first one not kept yet when
	// it is listed more than once; each other one is a new key.
	taken := make([]bool, len(old))
	for i, src := range sources {
		j := i
		if setSources {
			j = -1
			for o, k := range old {
				if !taken[o] && sameSource(k.source.src, src) {
					j = o
					break
				}
			}
		}
		if j >= 0 {
			taken[j] = true
			k := old[j]
			moved := k.sourceN != i+1
			k.sourceN = i + 1
			if moved && k.limiter().shared {
				// Its quota is its new position's, shared with the replicas that list the
				// sources so, and no other source's here; what it owed stays in its old scope.
				k.lim.Store(newKeyLimiterOf(upstream, k.scope(upstream), limits, lc))
				next.keys = append(next.keys, k)
			} else {
				keep(k)
			}
			continue
		}
		label++
		gate := sourceGate(src, p.keys, p.retired, next.keys)
		next.keys = append(next.keys, newSourceKey(upstream, src, gate, i+1, label, limits, lc)) // scoped as in New
	}
	next.retired = p.stillBusy(next.keys)
	return next
}

// stillBusy returns the keys of p, retired ones included, that are not in kept and have
// calls in flight.
func (p *keyPool) stillBusy(kept []*poolKey) []*poolKey {
	var out []*poolKey
	for _, list := range [][]*poolKey{p.keys, p.retired} {
		for _, k := range list {
			if k.inFlight.Load() > 0 && !slices.Contains(kept, k) {
				out = append(out, k)
			}
		}
	}
	return out
}

// sameSource reports whether a and b are the same source: equal values of a comparable
// type (the same pointer, most often), or the same function value of a func type (a
// keysource.Func passed again; see funcIdentity). Values of other types that cannot be
// compared are never the same.
func sameSource(a, b keysource.Source) (same bool) {
	ta := reflect.TypeOf(a)
	if ta != reflect.TypeOf(b) || ta == nil {
		return false
	}
	if ta.Kind() == reflect.Func {
		return funcIdentity(a) == funcIdentity(b)
	}
	if !ta.Comparable() {
		return false
	}
	defer func() {
		if recover() != nil { // a comparable type holding an incomparable value
			same = false
		}
	}()
	return a == b
}

// retune makes k's limiter enforce limits instead of old. The key's limiter state stays,
// retuned (limitstore.State.Retune: what each bucket owes stays owed, a pause or eviction
// in the store stays; in a shared store every replica then enforces the new limits), and
// what the limiter learned from the upstream's headers starts over. A change of
// MaxConcurrent, which a state cannot retune, gives a private state new slots (all free;
// calls in flight release theirs to the old ones, and calls waiting for one of those
// wait for a new one) and leaves a shared scope's slot limit as it is.
func (k *poolKey) retune(upstream string, old, limits Limits, lc *limiterConfig) {
	cur := k.limiter()
	if cur == nil {
		k.lim.Store(newKeyLimiterOf(upstream, k.scope(upstream), limits, lc))
		return
	}
	_ = cur.state.Retune(context.Background(), limits.spec(lc)) // a store that cannot answer keeps the old limits there
	newSlots := old.MaxConcurrent != limits.MaxConcurrent
	k.lim.Store(retunedKeyLimiterOf(upstream, cur, limits, lc, newSlots))
	if newSlots {
		cur.retire() // its slot waiters acquire on the new slots
	}
}

// funcIdentity returns the closure the func value f (of a func type) points to. Copies of
// one func value share it; two closures made apart never do, even of the same code,
// since each holds its own captured variables; a function that captures nothing has one
// for all its values, which all do the same. reflect cannot tell it (Value.Pointer of a
// func is its code): a func value is one pointer, to its closure, read here from a copy.
func funcIdentity(f any) unsafe.Pointer {
	v := reflect.ValueOf(f)
	c := reflect.New(v.Type())
	c.Elem().Set(v)
	return *(*unsafe.Pointer)(c.UnsafePointer())
}
