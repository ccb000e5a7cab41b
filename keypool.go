package llmclient

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/keysource"
	"github.com/llmclient/llmclient/ratelimit"
)

// keyConfig holds the key-pool settings.
type keyConfig struct {
	cooldown time.Duration // when a 429 carries no Retry-After
	evictFor time.Duration // after auth or quota failures
}

func defaultKeyConfig() keyConfig {
	return keyConfig{cooldown: defaultKeyCooldown, evictFor: defaultKeyEviction}
}

func (c *keyConfig) validate() error {
	if c.cooldown <= 0 || c.evictFor <= 0 {
		return errors.New("key cooldown and eviction times must be positive")
	}
	return nil
}

// Key-pool defaults.
const (
	// defaultKeyCooldown pauses a key after a 429 that names no Retry-After, when the call
	// does not retry that upstream itself (a retry pauses the key for its own backoff).
	defaultKeyCooldown = time.Second
	// defaultKeyEviction takes a key out of its pool after a 401 or an exhausted quota.
	defaultKeyEviction = time.Hour
)

// WithKeyCooldown sets how long a key pauses for every caller after a rate limit that
// carries no Retry-After, when the call does not retry that upstream itself (a retry
// pauses the key for its own backoff). It must be positive. Default 1s. A call whose every
// key is cooling waits for the first to come back when that fits its deadline and
// WithMaxWait (without either, it waits the cooldown out), and fails over or returns
// ErrNoKey at once otherwise; ratelimit.FailFast never waits.
func WithKeyCooldown(d time.Duration) Option {
	return optionFunc(func(c *config) { c.keys.cooldown = d })
}

// WithKeyEviction sets how long a key stays out of its pool after an auth failure or an
// exhausted quota. It also caps every cooldown, whatever Retry-After the upstream sends
// (a key is never blocked longer than an eviction). It must be positive; huge values
// saturate instead of overflowing. Default 1h.
func WithKeyEviction(d time.Duration) Option {
	return optionFunc(func(c *config) { c.keys.evictFor = d })
}

// poolKey is one API key of an upstream. Its state is read lock-free on the hot path.
type poolKey struct {
	label  string // "key#N", or "" for the adapter's own key
	secret string
	source *keySource // nil for a static key
	// sourceN is the source's position among the upstream's sources, from 1 (its scope);
	// Client.Update, which alone reads it after New, moves it.
	sourceN  int
	inFlight atomic.Int32
	// hrwID is the key's identity in prompt-cache affinity (affinityID); 0 until computed.
	hrwID atomic.Uint64
	// blockedUntil is the unix-nano end of a cooldown or eviction; evicted marks which.
	blockedUntil atomic.Int64
	evicted      atomic.Bool
	// sharedAt is when a shared store last confirmed the block the key holds (a pause or
	// an eviction another Client put there, see adopt), in unix nanoseconds; 0 when the
	// block, if any, is this Client's own.
	sharedAt atomic.Int64
	// pausedUntil is the unix-nano end of a pause held by the key's limiter alone (see
	// cool).
	pausedUntil atomic.Int64
	// lim is the key's limiter (never nil: it limits nothing until its Limits or its
	// upstream's headers say what to); Client.Update replaces it.
	lim atomic.Pointer[keyLimiter]
	// reported is the quota the upstream last reported for the key, at reportedAt, for
	// Snapshot; hasReport is false before the first report.
	reportMu   sync.Mutex
	reported   ratelimit.Status
	reportedAt time.Time
	hasReport  bool
}

// record keeps the quota the upstream reported for k, for Snapshot.
func (k *poolKey) record(rl *ratelimit.Status) {
	if rl == nil {
		return
	}
	now := time.Now()
	k.reportMu.Lock()
	k.reported, k.reportedAt, k.hasReport = *rl, now, true
	k.reportMu.Unlock()
}

// lastReport returns the quota the upstream last reported for k and when.
func (k *poolKey) lastReport() (ratelimit.Status, time.Time, bool) {
	k.reportMu.Lock()
	defer k.reportMu.Unlock()
	return k.reported, k.reportedAt, k.hasReport
}

// keyPool is the set of keys of one upstream, and what the upstream's calls take (the
// limiter's expected service time).
type keyPool struct {
	keys   []*poolKey
	limits Limits // each key's
	// retired are keys Client.Update removed that still had calls in flight then, so
	// that InFlight counts those calls until the next update.
	retired []*poolKey
	// service is what the upstream's calls take, kept across Client.Update.
	service *serviceTimes
	// lastLabel is the highest N of a label "key#N" the pool ever gave: Client.Update
	// labels a new key above it, so that no label names two secrets.
	lastLabel int
}

// newKeyPool builds the pool of the named upstream: its static keys, then its key
// sources, labelled "key#N" in that order. Each static key's limiter state is the store
// scope "<upstream>/key:<fingerprint>" ("<upstream>/default" for the adapter's own key):
// the same in every replica that shares a store, whatever order it lists its keys in, and
// never the key itself. A source's scope is "<upstream>/source:<N>", N its position in
// the upstream's list of sources counting from 1, also after Client.Update adds or moves
// sources (whatever their labels): replicas listing the same sources share their quotas.
// Every key has a limiter, limiting nothing until its Limits or its upstream's headers
// say what to: in a store it also holds the key's pause and eviction for every replica.
func newKeyPool(upstream string, secrets []string, sources []keysource.Source, limits Limits, lc *limiterConfig) *keyPool {
	p := &keyPool{limits: limits, service: &serviceTimes{}}
	if len(secrets) == 0 && len(sources) == 0 {
		k := &poolKey{}
		k.lim.Store(newKeyLimiterOf(upstream, k.scope(upstream), limits, lc))
		p.keys = []*poolKey{k}
		return p
	}
	for _, s := range secrets {
		p.keys = append(p.keys, newStaticKey(upstream, s, len(p.keys)+1, limits, lc))
	}
	for i, src := range sources {
		p.keys = append(p.keys, newSourceKey(upstream, src, sourceGate(src, p.keys), i+1, len(p.keys)+1, limits, lc))
	}
	p.lastLabel = len(p.keys)
	return p
}

// newStaticKey returns the pool key of a static secret labelled key#n.
func newStaticKey(upstream, secret string, n int, limits Limits, lc *limiterConfig) *poolKey {
	k := &poolKey{label: "key#" + strconv.Itoa(n), secret: secret}
	k.lim.Store(newKeyLimiterOf(upstream, k.scope(upstream), limits, lc))
	return k
}

// newSourceKey returns the pool key of the i-th key source (counting from 1: its scope),
// labelled key#n, whose fetches take gate.
func newSourceKey(upstream string, src keysource.Source, gate chan struct{}, i, n int, limits Limits, lc *limiterConfig) *poolKey {
	k := &poolKey{label: "key#" + strconv.Itoa(n), source: &keySource{src: src, gate: gate}, sourceN: i}
	k.lim.Store(newKeyLimiterOf(upstream, k.scope(upstream), limits, lc))
	return k
}

// sourceGate returns the fetch gate of src's keys among lists (see keySource.gate), a new
// one when none of them is src's.
func sourceGate(src keysource.Source, lists ...[]*poolKey) chan struct{} {
	for _, l := range lists {
		for _, k := range l {
			if k.source != nil && sameSource(k.source.src, src) {
				return k.source.gate
			}
		}
	}
	return make(chan struct{}, 1)
}

// scope is the name of k's limiter state in the store.
func (k *poolKey) scope(upstream string) string {
	switch {
	case k.source != nil:
		return upstream + "/source:" + strconv.Itoa(k.sourceN)
	case k.secret != "":
		return upstream + "/key:" + keyFingerprint(k.secret)
	}
	return upstream + "/default"
}

// limiter returns k's limiter (never nil: one that limits nothing until the key's Limits
// or its upstream's headers say what to).
func (k *poolKey) limiter() *keyLimiter { return k.lim.Load() }

// credential returns what to call with k now: its secret, or its source's current
// credential (refreshed first when due, waited for within ctx and keySourceWait).
func (k *poolKey) credential(ctx context.Context, now time.Time) (string, error) {
	if k.source == nil {
		return k.secret, nil
	}
	return k.source.get(ctx, now)
}

// keyFingerprint identifies a key in store scope names: 64 bits of a domain-separated
// SHA-256, which reveals nothing of a high-entropy API key.
func keyFingerprint(secret string) string {
	sum := sha256.Sum256([]byte("llmclient-key-scope:" + secret))
	return hex.EncodeToString(sum[:8])
}

// pick returns the usable key with the fewest requests in flight, and marks it in flight;
// avoid is passed over when another key is usable. When none is usable it returns nil and
// the earliest time a cooling key becomes usable (zero when every key is evicted).
func (p *keyPool) pick(now time.Time, avoid *poolKey) (k *poolKey, soonest time.Time) {
	nowNano := now.UnixNano()
	var best *poolKey
	var bestLoad int32
	var soonestNano int64
	for _, key := range p.keys {
		if until := key.blockedUntil.Load(); until > nowNano && !key.recheck(now) {
			if !key.evicted.Load() && (soonestNano == 0 || until < soonestNano) {
				soonestNano = until
			}
			continue
		}
		load := key.inFlight.Load()
		if key == avoid {
			load = 1<<31 - 1 // last resort
		}
		if best == nil || load < bestLoad {
			best, bestLoad = key, load
		}
	}
	if best == nil {
		if soonestNano == 0 {
			return nil, time.Time{}
		}
		return nil, time.Unix(0, soonestNano)
	}
	best.inFlight.Add(1)
	return best, time.Time{}
}

// back returns how long after now the first of p's keys comes back into use, evicted
// ones included (an eviction ends too, after WithKeyEviction): what a refusal because no
// key is usable reports as its AdmitAfter. 0 when a key is usable or the pool is empty.
func (p *keyPool) back(now time.Time) time.Duration {
	n := now.UnixNano()
	var first int64
	for _, k := range p.keys {
		until := max(k.blockedUntil.Load(), k.pausedUntil.Load())
		if until <= n {
			return 0
		}
		if first == 0 || until < first {
			first = until
		}
	}
	if first == 0 {
		return 0
	}
	return time.Duration(first - n)
}

// available reports whether some key other than except could be picked now.
func (p *keyPool) available(now time.Time, except *poolKey) bool {
	nowNano := now.UnixNano()
	for _, key := range p.keys {
		if key != except && key.blockedUntil.Load() <= nowNano {
			return true
		}
	}
	return false
}

// outUntil returns when k comes back into use, zero when it is usable at now: the end of
// its cooldown or eviction in the pool or of the pause its limiter holds after a rate
// limit, whichever is later; evicted says whether it is evicted.
func (k *poolKey) outUntil(now time.Time) (until time.Time, evicted bool) {
	n := now.UnixNano()
	blocked, paused := k.blockedUntil.Load(), k.pausedUntil.Load()
	if blocked <= n && paused <= n {
		return time.Time{}, false
	}
	return time.Unix(0, max(blocked, paused)), blocked > n && k.evicted.Load()
}

// blocked reports whether k is cooling down or evicted at now.
func (k *poolKey) blocked(now time.Time) bool { return k.blockedUntil.Load() > now.UnixNano() }

// block pauses (or, with evict, evicts) k for d from now; it never shortens an existing
// block. The end saturates instead of overflowing. It reports whether the block was
// extended.
func (k *poolKey) block(now time.Time, d time.Duration, evict bool) bool {
	n := addNanos(now.UnixNano(), d)
	for {
		cur := k.blockedUntil.Load()
		if cur >= n {
			if evict {
				k.evicted.Store(true)
			}
			return false
		}
		if k.blockedUntil.CompareAndSwap(cur, n) {
			k.evicted.Store(evict)
			k.sharedAt.Store(0)
			return true
		}
	}
}

// adopt blocks k for d from now because the shared store says another Client paused
// (after a 429) or evicted it, and notes that the store confirmed it at now.
func (k *poolKey) adopt(now time.Time, d time.Duration, evict bool) {
	if k.block(now, d, evict) || k.sharedAt.Load() != 0 {
		k.sharedAt.Store(now.UnixNano())
	}
}

// follow makes the block k just put on itself follow the shared store from now on, as an
// adopted one does (recheck), when stored says the store holds it too: a RestoreKey on
// another Client, or a store that lost it (a Redis restarted empty), then ends it here
// as well within about sharedRecheck. A block the store does not hold stays this
// Client's own.
// It returns stored.
func (k *poolKey) follow(now time.Time, stored bool) bool {
	if stored && k.blockedUntil.Load() > now.UnixNano() {
		k.sharedAt.Store(now.UnixNano())
	}
	return stored
}

// recheck asks the shared store again about a block k adopted from it (adopt), once the
// store's last answer is sharedRecheck old, by one caller (the others keep the block
// meanwhile): when the store no longer holds it (another Client's RestoreKey), the block
// ends here too and recheck reports true; otherwise the block follows what the store
// has left. Without that, a Client that adopted another's eviction would keep the key
// out for the whole eviction after it was restored, since it asks the store about a key
// only when an attempt is about to use it. A store that cannot answer leaves the block.
func (k *poolKey) recheck(now time.Time) bool {
	n := now.UnixNano()
	at := k.sharedAt.Load()
	if at == 0 || n-at < int64(sharedRecheck) || !k.sharedAt.CompareAndSwap(at, n) {
		return false
	}
	b, err := k.limiter().state.Blocked(context.Background())
	switch {
	case err != nil:
		return false
	case b.Evicted > 0:
		k.adopt(now, b.Evicted, true)
		return false
	case b.Paused > 0:
		k.adopt(now, b.Paused, false)
		return false
	}
	if until := k.blockedUntil.Load(); k.sharedAt.CompareAndSwap(n, 0) && k.blockedUntil.CompareAndSwap(until, 0) {
		k.evicted.Store(false)
	}
	return k.blockedUntil.Load() <= n
}

// cool pauses k for d from now after a rate limit and reports whether that extended its
// pause. The only key of a pool whose limiter has buckets is paused in its limiter alone
// (the caller pauses it there): its waiters then queue for the pause in order with the
// limiter's other waiters, and a request whose wait does not fit is refused at once,
// where a key cooling down in its pool would make it wait for the cooldown first and
// only then learn that the limiter's queue does not fit either.
func (k *poolKey) cool(now time.Time, d time.Duration, only bool) bool {
	if !only || !k.limiter().limited.Load() {
		return k.block(now, d, false)
	}
	n := addNanos(now.UnixNano(), d)
	for {
		cur := k.pausedUntil.Load()
		if cur >= n {
			return false
		}
		if k.pausedUntil.CompareAndSwap(cur, n) {
			return true
		}
	}
}

// addNanos returns t + d in unix nanoseconds, saturating at the largest int64 (the year
// 2262) instead of wrapping.
func addNanos(t int64, d time.Duration) int64 {
	if d > 0 && t > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	return t + int64(max(d, 0))
}

func (k *poolKey) String() string {
	if k.label == "" {
		return "default key"
	}
	return k.label
}

// effects applies a failed call's side effects on its key — header sync, eviction,
// cooldown — and returns the events they raise, for the run to emit once its state is
// settled. A cooldown lasts for the upstream's Retry-After, else for the wait before the
// planned retry, else for the key cooldown; never longer than the key eviction time.
func (c *Client) effects(a *attempt, e *Error, d Decision, p plan) events {
	var ev events
	if a.key == nil {
		return ev
	}
	if e.RateLimits != nil {
		a.syncLimits(e.RateLimits, usedClass(e.Class))
	}
	now := time.Now()
	kc := &c.cfg.keys
	switch {
	case d.Evict:
		stored := a.key.limiter().evict(kc.evictFor)
		if a.key.block(now, kc.evictFor, true) {
			ev.add(Event{Kind: event.KeyEvicted, Time: now, Upstream: a.up.Name, Key: a.keyLabel(),
				Class: e.Class, Until: now.Add(kc.evictFor)})
		}
		a.key.follow(now, stored)
	case d.Cooldown:
		dur := e.RetryAfter
		if dur <= 0 {
			dur = kc.cooldown
			if p.step == stepSame && p.wait > 0 {
				dur = p.wait
			}
		}
		dur = min(dur, kc.evictFor)
		if a.key.cool(now, dur, len(a.up.pool().keys) == 1) {
			a.key.follow(now, a.key.limiter().pause(now.Add(dur)))
			ev.add(Event{Kind: event.KeyCooldown, Time: now, Upstream: a.up.Name, Key: a.keyLabel(),
				Class: e.Class, Until: now.Add(dur)})
		}
	}
	if d.Alert {
		ev.add(Event{Kind: event.Alert, Time: now, Upstream: a.up.Name, Key: a.keyLabel(),
			Class: e.Class, Status: e.Status, Err: e})
	}
	return ev
}

// adoptSharedBlock looks up, in a shared store, whether another replica paused (after a
// 429) or evicted the attempt's key: it then blocks the key here too, for what is left,
// and moves the attempt to another usable key of the pool. When none is left, a paused
// key with buckets is left to its limiter, which waits for the pause in order with its
// other waiters; one without buckets is waited for here as keyLayer waits for a cooling
// key (within the deadline, WithMaxWait and the wait threshold, never in fail-fast mode),
// or refused at once. A store that cannot answer leaves the attempt as it is. Without a
// shared store it does nothing.
func (c *Client) adoptSharedBlock(ctx context.Context, a *attempt) error {
	for tries := 0; a.key.limiter().shared && tries <= len(a.up.pool().keys); tries++ {
		b, err := a.key.limiter().state.Blocked(ctx)
		if err != nil || b.Paused <= 0 && b.Evicted <= 0 {
			return nil
		}
		now := time.Now()
		if b.Evicted > 0 {
			a.key.adopt(now, b.Evicted, true)
		} else {
			a.key.adopt(now, b.Paused, false)
		}
		if k, _ := a.up.pool().pick(now, nil); k != nil {
			secret, err := k.credential(ctx, now)
			if err != nil { // its source failed: it sits out a second, as in keyLayer
				k.inFlight.Add(-1)
				k.block(now, keySourceRetry, false)
				continue
			}
			a.key.inFlight.Add(-1)
			a.key, a.call.APIKey = k, secret
			continue
		}
		if b.Evicted > 0 {
			return &Error{Class: failure.Unavailable, Upstream: a.up.Name, Model: a.call.Model,
				AdmitAfter: a.up.pool().back(now), Err: fmt.Errorf("%w: every key is evicted", ErrNoKey)}
		}
		if a.key.limiter().limited.Load() {
			return nil // the limiter's reservation waits for the pause
		}
		lim, err := c.cfg.limiter.waitLimit(ctx, a.layerWait, a.within)
		if err != nil {
			return c.asError(ctx, err, a)
		}
		if lim >= 0 && b.Paused > lim {
			return &Error{Class: failure.Unavailable, Upstream: a.up.Name, Model: a.call.Model, AdmitAfter: b.Paused,
				Message: "every key is cooling down for another " + b.Paused.Round(time.Millisecond).String(),
				Err:     fmt.Errorf("%w: every key is cooling down", ErrNoKey)}
		}
		if err := sleepFor(ctx, b.Paused); err != nil {
			return c.asError(ctx, err, a)
		}
		a.waited += b.Paused
		a.layerWait += b.Paused
	}
	return nil
}

// usedClass reports whether an attempt that made a call and ended with class was counted
// by the upstream (as attempt.settle decides for the limiter's lease).
func usedClass(class failure.Class) bool {
	return class == failure.None || class == failure.StreamInterrupted || class == failure.ContentFiltered ||
		class == failure.EmptyOutput || class == failure.Canceled
}
