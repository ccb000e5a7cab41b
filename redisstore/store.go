package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient/limitstore"
	"github.com/redis/go-redis/v9"
)

// Store is an limitstore.Store kept in Redis: every Client that uses a Store on the
// same Redis with the same prefix admits against the same quotas, pauses and concurrency
// slots. Pass it to llmclient.WithLimitStore. Each scope's buckets are updated by one
// server-side script per operation, on the server's clock; slots are leases that expire
// unless the holding process renews them. While Redis is unreachable, or under FailOpen
// slow (a reply later than a quarter of the timeout), the store admits locally (FailOpen)
// or refuses (FailClosed) without calling it, and goes back to Redis on its own once Redis answers in
// time again. Each call to Redis waits at most the timeout, and never past its caller's
// deadline; giving a slot back does not hold the caller.
//
// A Store is safe for concurrent use. Close it once the Clients that use it are done.
type Store struct {
	rdb    redis.Scripter
	cfg    config
	health health
	// slow is the reply time past which Redis counts as down although it answered: a
	// quarter of the timeout (run).
	slow  time.Duration
	local limitstore.Store // the FailOpen fallback, and private scopes
	// waiterTTL is how long a queued slot waiter, or a slot granted to it and not yet
	// claimed, outlives its last poll.
	waiterTTL time.Duration

	busyMu sync.Mutex
	busy   map[*state]struct{} // scopes with leases to renew or releases to retry
	kick   chan struct{}       // Redis answers again: renew and retry at once

	// localHeld are the slot leases of the local fallback that callers hold, by the id
	// handed them (holdLocal): a lease released again frees nothing.
	localMu   sync.Mutex
	localHeld map[uint64]localLease

	wakeMu sync.Mutex
	wake   map[string]map[chan struct{}]struct{} // slot waiters of this process, by scope

	// giving are the give-backs on their way to Redis (giveBack), which Close waits for;
	// closing, set by Close under givingMu, makes later ones run in their caller.
	givingMu sync.Mutex
	giving   sync.WaitGroup
	closing  bool

	stop      context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
	closed    atomic.Bool
}

// Slot waiters poll Redis, starting fast and slowing down to pollMax; a slot released by
// this process wakes its waiters at once.
const (
	pollMin = 2 * time.Millisecond
	pollMax = 50 * time.Millisecond
)

// New returns a Store on rdb, any go-redis client: every redis.UniversalClient is a
// redis.Scripter, and so is whatever redis.NewUniversalClient returns.
//
//   - *redis.Client: one server, or through redis.NewFailoverClient the master that
//     Sentinel names (after a failover the client follows the new master; state written
//     to the old one and not yet replicated is lost, like any Redis data).
//   - *redis.ClusterClient: every key of a scope shares one hash tag, so each script
//     touches a single slot; scopes spread over the nodes.
//   - *redis.Ring: a scope's keys stay on one shard; when the Ring drops or adds a shard,
//     the scopes that move start afresh on their new shard (full buckets, no pause, no
//     slot held), so the Ring suits stores that tolerate such a reset.
//   - redis.NewFailoverClusterClient (NewUniversalClient with a MasterName and
//     RouteByLatency or RouteRandomly) works, but the store only writes, so routing reads
//     to replicas buys nothing, and go-redis v9.22 leaks its Sentinel goroutines on Close:
//     prefer NewFailoverClient.
//
// The client must have ContextTimeoutEnabled set, so that the store's timeout bounds each
// call; New returns an error when it can see that it is not (for the three types above).
// For TLS, set the client's TLSConfig (see the README). New neither connects nor closes
// rdb. It starts one goroutine, which renews held slots until Close.
func New(rdb redis.Scripter, opts ...Option) (*Store, error) {
	if rdb == nil {
		return nil, errors.New("redisstore: nil Redis client")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if on, known := contextTimeouts(rdb); known && !on {
		return nil, errors.New("redisstore: the Redis client must set ContextTimeoutEnabled, or calls could outlast the store's timeout")
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Store{
		rdb:       rdb,
		cfg:       cfg,
		health:    health{interval: cfg.probeInterval},
		slow:      cfg.timeout / slowShare,
		local:     limitstore.NewMemory(),
		waiterTTL: 10*pollMax + 2*cfg.timeout,
		busy:      make(map[*state]struct{}),
		kick:      make(chan struct{}, 1),
		wake:      make(map[string]map[chan struct{}]struct{}),
		stop:      stop,
		done:      make(chan struct{}),
	}
	go s.renewLoop(ctx)
	return s, nil
}

var _ limitstore.Store = (*Store)(nil)

// contextTimeouts reports whether the client bounds calls by their context, when its
// options can be read.
func contextTimeouts(rdb redis.Scripter) (on, known bool) {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled, true
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled, true
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled, true
	}
	return false, false
}

// Close stops renewing the slots and in-flight holds this process holds, so they expire
// within the lease TTL (a hold made after Close too), stops the store's goroutine and
// waits for the slot releases on their way to Redis (each within the timeout).
// After Close, AcquireSlot takes no lease in Redis (nothing would renew it): it acts as if
// Redis were away, taking a local slot under FailOpen and refusing with ErrUnavailable
// under FailClosed; a slot taken before Close is still given back to Redis (then before
// ReleaseSlot returns), and the buckets and pauses work as before. Close does not close
// the Redis client. It is idempotent and returns nil.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.stop()
		<-s.done
		s.givingMu.Lock()
		s.closing = true
		s.givingMu.Unlock()
		s.giving.Wait()
	})
	return nil
}

// Healthy reports whether the last call to Redis answered within a quarter of the
// timeout: false while the store admits locally (FailOpen) or refuses (FailClosed).
func (s *Store) Healthy() bool { return s.health.ok() }

// Open returns the state of the named scope, shared with every Store on the same Redis
// and prefix. The empty name is a scope private to the caller, kept in memory. Open does
// not call Redis. All replicas must open a scope with the same limits.
//
// The limits are clamped as described on MaxCharge, MaxPause and WaitHorizon: a rate that
// is not positive and finite (zero, negative, NaN, +Inf) limits nothing; a rate below one
// unit per WaitHorizon refills one unit per WaitHorizon; a burst that is negative or NaN
// is 0, and one above WaitHorizon of its rate is that; MaxConcurrent above 2^53 is 2^53;
// a BatchShare outside (0, 1] is 1. A Client's limits are never affected.
func (s *Store) Open(name string, spec limitstore.Spec) limitstore.State {
	if name == "" {
		return s.local.Open("", spec)
	}
	return newState(s, name, spec)
}

// slowShare is the share of the timeout past which a reply counts as a failure: a call
// makes about four round trips before its upstream (shared breaker, block, slot,
// buckets), and the ones before the first slow reply take less than a quarter each.
const slowShare = 4

// run calls a script with the store's timeout, unless Redis is known to be down (errDown).
// An error is the caller's context error when that context is done, else an error
// wrapping ErrUnavailable; either way, unless it is errDown, the script may still run.
//
// Under FailOpen, a reply that comes later than a quarter of the timeout is used (the
// script ran), but marks Redis down as a failure does, and so does a caller that gave up
// after waiting that long: a Redis that answers slowly sends the store to its fallback for the probe
// interval instead of adding a round trip's wait to every step of every call.
func (s *Store) run(ctx context.Context, sc *redis.Script, keys []string, args ...any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !s.health.allow() {
		return nil, errDown
	}
	start := time.Now()
	cctx, cancel := context.WithDeadline(ctx, start.Add(s.cfg.timeout))
	v, err := sc.Run(cctx, s.rdb, keys, args...).Result()
	cancel()
	// Under FailClosed the fallback refuses: a slow answer is still better than refusals
	// for a probe interval, so only a failure sends the store there.
	slow := s.cfg.mode == FailOpen && time.Since(start) > s.slow
	if err != nil {
		if ctx.Err() != nil {
			// The caller gave up: that says nothing about Redis, unless it waited long.
			if slow {
				s.health.down()
			}
			return nil, ctx.Err()
		}
		s.health.down()
		return nil, unavailable(err, s.cfg.timeout)
	}
	if slow {
		s.health.down()
		return v, nil
	}
	if s.health.up() {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	return v, nil
}

// clockArg is the bucket scripts' clock argument: "" for the server's clock, or the test
// clock's time in µs.
func (s *Store) clockArg() any {
	if s.cfg.clock == nil {
		return ""
	}
	return s.cfg.clock().UnixMicro()
}

// badReply records a reply the store cannot use, as a failure of Redis, and returns its
// error. The error names the reply's type only: whatever the server sent, the error stays
// small.
func (s *Store) badReply(v any) error {
	s.health.down()
	return &unavailableError{msg: fmt.Sprintf("redisstore: redis unavailable: unexpected reply of type %T", v)}
}

// waiter registers a channel that a slot released in this process on the named scope
// wakes; the returned func unregisters it.
func (s *Store) waiter(name string) (chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.wakeMu.Lock()
	set := s.wake[name]
	if set == nil {
		set = make(map[chan struct{}]struct{})
		s.wake[name] = set
	}
	set[ch] = struct{}{}
	s.wakeMu.Unlock()
	return ch, func() {
		s.wakeMu.Lock()
		// While ch is registered its set is not empty, so it is still the scope's set.
		set := s.wake[name]
		delete(set, ch)
		if len(set) == 0 {
			delete(s.wake, name)
		}
		s.wakeMu.Unlock()
	}
}

// notify wakes this process's slot waiters on the named scope.
func (s *Store) notify(name string) {
	s.wakeMu.Lock()
	for ch := range s.wake[name] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	s.wakeMu.Unlock()
}
