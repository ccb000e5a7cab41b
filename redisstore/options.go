package redisstore

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// FailMode says what the store does while Redis is slow or unreachable.
type FailMode uint8

const (
	// FailOpen admits against a limiter in this process (see WithLocalShare) while Redis
	// cannot be reached: traffic keeps flowing, and the replicas together may exceed the
	// shared quota until Redis is back; the upstream's 429s then pace them.
	FailOpen FailMode = iota
	// FailClosed refuses admission while Redis cannot be reached: each LimitState method
	// returns an error that wraps ErrUnavailable, and a Client's request fails with a
	// rate_limited error that wraps both llmclient.ErrRateLimited and ErrUnavailable, so
	// the Client fails over to an upstream that does not use the store.
	FailClosed
)

// String returns "fail-open" or "fail-closed".
func (m FailMode) String() string {
	switch m {
	case FailOpen:
		return "fail-open"
	case FailClosed:
		return "fail-closed"
	}
	return fmt.Sprintf("FailMode(%d)", uint8(m))
}

// Store defaults.
const (
	// DefaultPrefix starts every Redis key the store writes.
	DefaultPrefix = "llmclient"
	// DefaultTimeout bounds each call to Redis. A Redis on the same network answers in
	// well under a millisecond; a call that takes longer than this fails, and a reply that
	// takes longer than a quarter of it counts as a failure too.
	DefaultTimeout = 100 * time.Millisecond
	// DefaultProbeInterval is how long the store leaves Redis alone after a failed call
	// before one request tries it again: a dead Redis costs at most one timeout per
	// interval, and a Redis that comes back is used again within it.
	DefaultProbeInterval = time.Second
	// DefaultLeaseTTL is how long a concurrency slot, or the in-flight hold of a call
	// (limitstore.Reservation.InFlight), outlives the process holding it. The store renews
	// held slots and holds every third of it.
	DefaultLeaseTTL = 10 * time.Second
	// DefaultLocalShare is the share of each limit that the local fallback enforces under
	// FailOpen: the whole quota in each process.
	DefaultLocalShare = 1.0
)

// Upper bounds of the durations the options take: far above any useful setting, and low
// enough that the store's arithmetic on them (deadlines, expiries in Redis, the waiters'
// TTL of ten polls and two timeouts) cannot overflow.
const (
	maxTimeout       = time.Minute
	maxProbeInterval = time.Hour
	maxLeaseTTL      = time.Hour
)

// Option configures a Store.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	prefix        string
	timeout       time.Duration
	mode          FailMode
	probeInterval time.Duration
	leaseTTL      time.Duration
	localShare    float64
	// clock, when set (only by tests, see export_test.go), is the time the bucket scripts
	// compute with instead of the server's TIME: a test in virtual time (testing/synctest)
	// runs them on its own clock.
	clock func() time.Time
}

func defaultConfig() config {
	return config{
		prefix:        DefaultPrefix,
		timeout:       DefaultTimeout,
		probeInterval: DefaultProbeInterval,
		leaseTTL:      DefaultLeaseTTL,
		localShare:    DefaultLocalShare,
	}
}

func (c *config) validate() error {
	var errs []error
	if c.prefix == "" || strings.ContainsAny(c.prefix, "{}") {
		errs = append(errs, fmt.Errorf("redisstore: prefix %q must be non-empty and hold no braces", c.prefix))
	}
	if c.timeout <= 0 || c.timeout > maxTimeout {
		errs = append(errs, fmt.Errorf("redisstore: timeout %v is outside (0, %v]", c.timeout, maxTimeout))
	}
	if c.mode > FailClosed {
		errs = append(errs, fmt.Errorf("redisstore: unknown fail mode %d", c.mode))
	}
	if c.probeInterval <= 0 || c.probeInterval > maxProbeInterval {
		errs = append(errs, fmt.Errorf("redisstore: probe interval %v is outside (0, %v]", c.probeInterval, maxProbeInterval))
	}
	if c.leaseTTL < 30*time.Millisecond || c.leaseTTL > maxLeaseTTL ||
		(c.timeout > 0 && c.timeout <= maxTimeout && c.leaseTTL < 3*c.timeout) {
		errs = append(errs, fmt.Errorf("redisstore: lease TTL %v must be at least 30ms and three timeouts, and at most %v",
			c.leaseTTL, maxLeaseTTL))
	}
	if !(c.localShare > 0 && c.localShare <= 1) {
		errs = append(errs, fmt.Errorf("redisstore: local share %v is outside (0, 1]", c.localShare))
	}
	return errors.Join(errs...)
}

// WithPrefix sets the prefix of every Redis key the store writes, so several
// applications can share one Redis. Stores that share a quota must use the same prefix.
// It must hold no braces. Default DefaultPrefix.
func WithPrefix(p string) Option { return optionFunc(func(c *config) { c.prefix = p }) }

// WithTimeout bounds each call to Redis; a call that takes longer fails and, under
// FailOpen, the request is admitted locally. Under FailOpen a reply that takes longer than
// a quarter of it is used, but counts as a failure too: the store leaves Redis alone for
// the probe interval, so that a slow Redis does not add a wait to every round trip of every
// request; set it to four times the slowest reply that should count as Redis answering.
// Under FailClosed, whose fallback refuses, only a failure does. It must be
// in (0, 1m]. Default DefaultTimeout.
func WithTimeout(d time.Duration) Option { return optionFunc(func(c *config) { c.timeout = d }) }

// WithFailMode sets what the store does while Redis cannot be reached. Default FailOpen.
func WithFailMode(m FailMode) Option { return optionFunc(func(c *config) { c.mode = m }) }

// WithProbeInterval sets how long the store stops calling Redis after a failure before a
// single request tries it again. It must be in (0, 1h]. Default DefaultProbeInterval.
func WithProbeInterval(d time.Duration) Option {
	return optionFunc(func(c *config) { c.probeInterval = d })
}

// WithLeaseTTL sets how long a concurrency slot, or a call's in-flight hold, outlives a
// process that stops renewing it (a crash, a lost network): the bound on how long a dead
// replica's slots stay taken and its calls' output stays held. It must be at least 30ms
// and three timeouts, and at most an hour. Default DefaultLeaseTTL.
func WithLeaseTTL(d time.Duration) Option { return optionFunc(func(c *config) { c.leaseTTL = d }) }

// WithLocalShare sets the share, in (0, 1], of each rate, burst and concurrency bound that
// the local fallback enforces under FailOpen; with N replicas, 1/N keeps their sum within
// the quota while Redis is away. Default DefaultLocalShare (1).
func WithLocalShare(f float64) Option { return optionFunc(func(c *config) { c.localShare = f }) }
