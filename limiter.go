package llmclient

// PLACEHOLDER — the limiter helper replaces this whole file. The signatures below are the
// contract the engine calls; with zero Limits they are exact (no limiting).

import (
	"context"
	"time"
)

// Limits bounds one key's traffic. A zero field means no limit on that dimension.
type Limits struct {
	RPM           int
	TPM           int
	MaxConcurrent int
}

func (l Limits) validate() error { return nil }

type limiterConfig struct{}

func defaultLimiterConfig() limiterConfig         { return limiterConfig{} }
func (c *limiterConfig) validate() error          { return nil }
func (c *limiterConfig) enabled(cfg *config) bool { return false }
func (c *limiterConfig) cost(req *Request) int    { return 0 }

type keyLimiter struct{}

func newKeyLimiter(l Limits, cfg *limiterConfig) *keyLimiter { return nil }

type limitLease struct{}

func (l *keyLimiter) acquire(ctx context.Context, cost int, prio Priority) (limitLease, time.Duration, error) {
	return limitLease{}, 0, nil
}
func (ls limitLease) release(actualTokens int, used bool) {}
func (l *keyLimiter) observe(rl *RateLimits)              {}

func (l *keyLimiter) pause(until time.Time) {}
