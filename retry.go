package llmclient

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Retry defaults. They are documented on the options that change them.
const (
	DefaultMaxAttempts      = 3
	DefaultMaxTotalAttempts = 6
	DefaultBackoffInitial   = 500 * time.Millisecond
	DefaultBackoffMax       = 30 * time.Second
	DefaultMaxRetryAfter    = time.Minute
	DefaultRetryBudgetRatio = 0.3
	DefaultRetryBudgetFloor = 10
	DefaultRetryBudgetTTL   = 10 * time.Second
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
		maxAttempts:    DefaultMaxAttempts,
		maxTotal:       DefaultMaxTotalAttempts,
		backoffInitial: DefaultBackoffInitial,
		backoffMax:     DefaultBackoffMax,
		maxRetryAfter:  DefaultMaxRetryAfter,
		budgetRatio:    DefaultRetryBudgetRatio,
		budgetFloor:    DefaultRetryBudgetFloor,
		budgetTTL:      DefaultRetryBudgetTTL,
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
	if c.backoffInitial <= 0 || c.backoffMax < c.backoffInitial {
		errs = append(errs, errors.New("backoff needs 0 < initial <= max"))
	}
	if c.maxRetryAfter < 0 {
		errs = append(errs, errors.New("negative max Retry-After"))
	}
	if c.budgetRatio < 0 || c.budgetFloor < 0 || c.budgetTTL <= 0 {
		errs = append(errs, errors.New("retry budget needs ratio >= 0, floor >= 0 and a positive window"))
	}
	return errors.Join(errs...)
}

// WithMaxAttempts bounds the attempts on one upstream, the first one included.
// Default DefaultMaxAttempts (3).
func WithMaxAttempts(n int) Option {
	return optionFunc(func(c *config) { c.retry.maxAttempts = n })
}

// WithMaxTotalAttempts bounds the attempts of one call across every upstream it fails over
// to. Default DefaultMaxTotalAttempts (6).
func WithMaxTotalAttempts(n int) Option {
	return optionFunc(func(c *config) { c.retry.maxTotal = n })
}

// WithBackoff sets the exponential backoff used when the upstream gives no Retry-After:
// the first wait is about initial, doubling up to max, each randomized by ±50%.
// Defaults DefaultBackoffInitial (500ms) and DefaultBackoffMax (30s).
func WithBackoff(initial, max time.Duration) Option {
	return optionFunc(func(c *config) { c.retry.backoffInitial, c.retry.backoffMax = initial, max })
}

// WithMaxRetryAfter caps the wait the Client accepts from an upstream's Retry-After (and
// vendor hints) before retrying the same upstream; a longer one fails over instead.
// Default DefaultMaxRetryAfter (1m).
func WithMaxRetryAfter(d time.Duration) Option {
	return optionFunc(func(c *config) { c.retry.maxRetryAfter = d })
}

// WithRetryBudget bounds retries client-wide so a failing upstream cannot multiply traffic:
// over a sliding window of ttl, retries (and failovers) may be at most ratio × first attempts
// plus floor. Defaults: ratio 0.3, floor 10, window 10s — enough to absorb the 10–20%
// transient error rates normal for LLM upstreams, while a total outage costs at most 1.3×.
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
// never less than asked.
func retryAfterWait(ra time.Duration) time.Duration {
	j := ra / 10
	if j > time.Second {
		j = time.Second
	}
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

// retryBudget allows retries up to ratio × first attempts + floor over a sliding window,
// kept as ten buckets. Recording a first attempt, on every call, is lock-free; deciding a
// retry takes a mutex so that concurrent retries cannot overshoot the budget. It is safe
// for concurrent use.
type retryBudget struct {
	ratio  float64
	floor  int
	bucket int64 // nanoseconds

	slots [budgetSlots]budgetSlot
	mu    sync.Mutex // serializes tryRetry
}

const budgetSlots = 10

// budgetSlot counts one bucket of the window; stamp is the bucket's index in time.
type budgetSlot struct {
	stamp   atomic.Int64
	firsts  atomic.Int64
	retries atomic.Int64
}

func newRetryBudget(c *retryConfig) *retryBudget {
	return &retryBudget{
		ratio:  c.budgetRatio,
		floor:  c.budgetFloor,
		bucket: int64(c.budgetTTL / budgetSlots),
	}
}

// slot returns the bucket for now, clearing it when it still holds an older bucket's
// counts. Two goroutines rolling the same slot over at once may lose a count or two: the
// budget is a bound on amplification, not an exact ledger.
func (b *retryBudget) slot(now time.Time) *budgetSlot {
	idx := now.UnixNano() / b.bucket
	s := &b.slots[idx%budgetSlots]
	if old := s.stamp.Load(); old != idx && s.stamp.CompareAndSwap(old, idx) {
		s.firsts.Store(0)
		s.retries.Store(0)
	}
	return s
}

// first records a first attempt.
func (b *retryBudget) first(now time.Time) {
	b.slot(now).firsts.Add(1)
}

// tryRetry reports whether a retry is allowed now, and records it when it is.
func (b *retryBudget) tryRetry(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := b.slot(now)
	oldest := now.UnixNano()/b.bucket - budgetSlots + 1
	var firsts, retries int64
	for i := range b.slots {
		s := &b.slots[i]
		if s.stamp.Load() >= oldest {
			firsts += s.firsts.Load()
			retries += s.retries.Load()
		}
	}
	if float64(retries) >= b.ratio*float64(firsts)+float64(b.floor) {
		return false
	}
	cur.retries.Add(1)
	return true
}
