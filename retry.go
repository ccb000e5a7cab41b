package llmclient

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Retry defaults. They are documented on the options that change them.
const (
	defaultMaxAttempts      = 3
	defaultMaxTotalAttempts = 6
	defaultBackoffInitial   = 500 * time.Millisecond
	defaultBackoffMax       = 30 * time.Second
	defaultMaxRetryAfter    = time.Minute
	defaultRetryBudgetRatio = 0.3
	defaultRetryBudgetFloor = 10
	defaultRetryBudgetTTL   = 10 * time.Second
)

// retryConfig holds the retry layer's settings.
type retryConfig struct {
	maxAttempts    int // per upstream, first attempt included
	maxTotal       int // across failover
	backoffInitial time.Duration
	backoffMax     time.Duration
	maxRetryAfter  time.Duration
	budgetRatio    float64
	budgetFloor    int
	budgetTTL      time.Duration
}

func defaultRetryConfig() retryConfig {
	return retryConfig{
		maxAttempts:    defaultMaxAttempts,
		maxTotal:       defaultMaxTotalAttempts,
		backoffInitial: defaultBackoffInitial,
		backoffMax:     defaultBackoffMax,
		maxRetryAfter:  defaultMaxRetryAfter,
		budgetRatio:    defaultRetryBudgetRatio,
		budgetFloor:    defaultRetryBudgetFloor,
		budgetTTL:      defaultRetryBudgetTTL,
	}
}

func (c *retryConfig) validate() error {
	var errs []error
	if c.maxAttempts < 1 {
		errs = append(errs, errors.New("max attempts per upstream must be at least 1"))
	}
	if c.maxTotal < 1 {
		errs = append(errs, errors.New("max total attempts must be at least 1"))
	}
	if c.backoffInitial <= 0 || c.backoffMax < c.backoffInitial || c.backoffMax > maxBackoff {
		errs = append(errs, fmt.Errorf("backoff needs 0 < initial <= max <= %v, got initial %v, max %v",
			maxBackoff, c.backoffInitial, c.backoffMax))
	}
	if c.maxRetryAfter < 0 {
		errs = append(errs, fmt.Errorf("negative max Retry-After %v", c.maxRetryAfter))
	}
	if !(c.budgetRatio >= 0 && c.budgetRatio <= maxBudgetRatio) {
		errs = append(errs, fmt.Errorf("retry budget ratio %v is outside [0, %v]", c.budgetRatio, maxBudgetRatio))
	}
	if c.budgetFloor < 0 {
		errs = append(errs, fmt.Errorf("retry budget floor %d is negative", c.budgetFloor))
	}
	if c.budgetTTL < minBudgetWindow || c.budgetTTL > maxBudgetWindow {
		errs = append(errs, fmt.Errorf("retry budget window %v is outside [%v, %v]", c.budgetTTL, minBudgetWindow, maxBudgetWindow))
	}
	return errors.Join(errs...)
}

// Bounds of the retry options, checked in New.
const (
	maxBackoff      = 24 * time.Hour
	maxBudgetRatio  = 1000
	minBudgetWindow = 10 * time.Millisecond // ten slots of at least a millisecond
	maxBudgetWindow = 24 * time.Hour
)

// WithMaxAttempts bounds the upstream calls a call makes on one upstream, the first one
// included (retries, another key, the larger-output retry); n must be at least 1. Local
// refusals, which make no call, do not count. Without a context deadline, this cap and the
// backoff bound a call's retries. Default 3.
func WithMaxAttempts(n int) Option {
	return optionFunc(func(c *config) { c.retry.maxAttempts = n })
}

// WithMaxTotalAttempts bounds the upstream calls of one call across every upstream it
// moves to, hedges included; n must be at least 1. Without a context deadline, this cap
// bounds a call's length together with the attempt timeouts. Default 6.
func WithMaxTotalAttempts(n int) Option {
	return optionFunc(func(c *config) { c.retry.maxTotal = n })
}

// WithBackoff sets the exponential backoff used when the upstream gives no Retry-After:
// the first wait is about initial, doubling up to max, each randomized by ±50%. It needs
// 0 < initial <= max <= 24h. A wait that would not end before the context's deadline is
// not started; without a deadline every planned wait is slept. Defaults 500ms and 30s.
func WithBackoff(initial, max time.Duration) Option {
	return optionFunc(func(c *config) { c.retry.backoffInitial, c.retry.backoffMax = initial, max })
}

// WithMaxRetryAfter caps the wait the Client accepts from an upstream's Retry-After (and
// vendor hints) before retrying the same upstream; after a longer one the upstream gives
// up (see Decision.Failover). 0 never waits for a Retry-After; it must not be negative.
// Without a context deadline this cap is the only bound on such a wait. Default 1m.
func WithMaxRetryAfter(d time.Duration) Option {
	return optionFunc(func(c *config) { c.retry.maxRetryAfter = d })
}

// WithRetryBudget bounds the retries to each upstream, so that a failing upstream cannot
// multiply its traffic: over a sliding window of ttl, the calls to an upstream after a
// call's first one there may be at most ratio × first calls there plus floor. Failing over
// to another upstream is a first call there, so the budget of a failing upstream never
// stands between a call and a healthy one. A spent budget makes the upstream give up
// (see Decision.Failover) without waiting. ratio must be in [0, 1000] (NaN is refused),
// floor at least 0, ttl within [10ms, 24h]. Defaults: ratio 0.3, floor 10, window 10s —
// enough to absorb the 10–20% transient error rates normal for LLM upstreams, while a
// total outage costs at most 1.3× the traffic. A hedge spends the budget of the upstream it
// hedges. The budget needs no deadline.
func WithRetryBudget(ratio float64, floor int, ttl time.Duration) Option {
	return optionFunc(func(c *config) {
		c.retry.budgetRatio, c.retry.budgetFloor, c.retry.budgetTTL = ratio, floor, ttl
	})
}

// newBackOff returns a fresh backoff for one call: BackOffs are stateful and never shared.
func (c *retryConfig) newBackOff() *backoff.ExponentialBackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(c.backoffInitial),
		backoff.WithMaxInterval(c.backoffMax),
		backoff.WithMultiplier(2),
		backoff.WithRandomizationFactor(0.5),
		backoff.WithMaxElapsedTime(0),
	)
}

// retryAfterWait adds jitter to a server-requested wait: up to 10% more, at most one second,
// never less than asked (the sum saturates at the longest Duration).
func retryAfterWait(ra time.Duration) time.Duration {
	j := min(ra/10, time.Second, math.MaxInt64-ra)
	if j <= 0 {
		return ra
	}
	return ra + rand.N(j+1)
}

// fits reports whether a wait of d can end before ctx's deadline.
func fits(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) > d
}

// sleep waits d or until ctx is done; a wait of 0 still reports a done ctx.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	return sleepFor(ctx, d)
}

// sleepFor waits d or until ctx is done; a wait of 0 returns at once, whatever ctx.
func sleepFor(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retryBudget bounds the retries to one upstream: over a sliding window of ten buckets,
// retries may be at most ratio × first attempts + floor. A call's first call to an upstream
// (its first attempt, or the first after failing over to it) is a first attempt there;
// every further call to the same upstream is a retry. Recording a first attempt, on every
// call, is lock-free and spread over shards so that cores do not contend for one counter;
// deciding a retry takes a mutex so that concurrent retries cannot overshoot. It is safe
// for concurrent use.
type retryBudget struct {
	ratio  float64
	floor  float64
	bucket int64 // nanoseconds

	shards  [budgetShards]budgetShard
	retries [budgetSlots]budgetSlot
	mu      sync.Mutex // serializes tryRetry
}

const (
	budgetSlots  = 10
	budgetShards = 8
)

// budgetSlot counts one bucket of the window; stamp is the bucket's index in time.
type budgetSlot struct {
	stamp atomic.Int64
	n     atomic.Int64
}

// budgetShard counts first attempts in its own cache lines.
type budgetShard struct {
	slots [budgetSlots]budgetSlot
	_     [64]byte
}

func newRetryBudget(c *retryConfig) *retryBudget {
	return &retryBudget{
		ratio:  c.budgetRatio,
		floor:  float64(c.budgetFloor),
		bucket: int64(c.budgetTTL / budgetSlots),
	}
}

// at returns slot s of the bucket with index idx, cleared when it still holds an older
// bucket's count. Two goroutines rolling the same slot over at once may lose a count or
// two: the budget is a bound on amplification, not an exact ledger.
func (s *budgetSlot) at(idx int64) *budgetSlot {
	if old := s.stamp.Load(); old != idx && s.stamp.CompareAndSwap(old, idx) {
		s.n.Store(0)
	}
	return s
}

// first records a first attempt.
func (b *retryBudget) first(now time.Time) {
	idx := now.UnixNano() / b.bucket
	sh := &b.shards[uint(now.Nanosecond())%budgetShards] // spread as addSuccess in breaker does
	sh.slots[idx%budgetSlots].at(idx).n.Add(1)
}

// counts sums the first attempts and retries of the window that ends at now.
func (b *retryBudget) counts(now time.Time) (firsts, retries float64) {
	idx := now.UnixNano() / b.bucket
	oldest := idx - budgetSlots + 1
	for i := range b.retries {
		if s := &b.retries[i]; s.stamp.Load() >= oldest {
			retries += float64(s.n.Load())
		}
	}
	for j := range b.shards {
		for i := range b.shards[j].slots {
			if s := &b.shards[j].slots[i]; s.stamp.Load() >= oldest {
				firsts += float64(s.n.Load())
			}
		}
	}
	return firsts, retries
}

// allows reports whether a retry would be allowed now, without taking it.
func (b *retryBudget) allows(now time.Time) bool {
	firsts, retries := b.counts(now)
	return retries < b.ratio*firsts+b.floor
}

// tryRetry reports whether a retry is allowed now, and records it when it is.
func (b *retryBudget) tryRetry(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.allows(now) {
		return false
	}
	idx := now.UnixNano() / b.bucket
	b.retries[idx%budgetSlots].at(idx).n.Add(1)
	return true
}
