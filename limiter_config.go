package llmclient

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/llmclient/llmclient/estimate"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/ratelimit"
)

// Limits bounds the traffic of one API key (each key of an upstream's pool gets its own
// limits; an upstream without a pool is one key). A zero field means no limit on that
// dimension; the zero Limits sets no limit at all.
//
// Requests and tokens are token buckets that refill continuously at RPM/60 and TPM/60 per
// second. A bucket is smaller than a minute's quota, because upstreams also meter shorter
// windows (Azure OpenAI checks its rates over 1 and 10 seconds): by default it holds a
// sixth of the quota, ten seconds' worth (see WithBurstFraction).
//
// When an upstream reports its quota in response headers (x-ratelimit-* and
// anthropic-ratelimit-*), the limiter also learns from them, with or without Limits: a
// key whose Limits are zero starts limiting at the limits the headers report, a bucket
// shrinks to a shorter enforcement window the headers reveal, the charge of a prompt is
// calibrated to what the upstream counts (Attempt.ChargedTokens), and a key used by other
// processes too is shared with them. See WithLimitStore for what is kept per process.
//
// Every count is bounded so that no request or report can switch a limit off: a request's
// charge saturates at 2^40 tokens and costs a bucket at most its burst plus a minute of
// refill, and a usage report leaves at most a minute of debt (package limitstore).
type Limits struct {
	// RPM is the requests per minute.
	RPM int
	// TPM is the tokens per minute, prompt and output together. A request is charged its
	// prompt estimate plus its MaxTokens (see WithReservedOutput) before it is sent.
	TPM int
	// ITPM and OTPM are the input and the output tokens per minute, for vendors that meter
	// them apart (Anthropic), each its own token bucket beside TPM's, sized like it (the
	// burst fraction of its quota), learning its window and level from the upstream's
	// input- and output-token headers. How each is charged follows the Provider's
	// ratelimit.Rule: ITPM is charged the prompt estimate (scaled by the learned ratio of the
	// input the upstream counts, less cache reads where they are free) and reconciled by
	// Metering; OTPM is charged the reserved output where the vendor charges the
	// reservation, else the expected output (the reserved output times the share of it
	// the key's calls generated, plus half a standard deviation of that share),
	// reconciled with the output reported. 0: no
	// limit. They apply to keys, partitions and quota scopes.
	ITPM, OTPM int
	// RPD and TPD are the requests and tokens per day, for keys with a daily quota (free
	// tiers, some vendors' per-day limits). Each is a bucket that holds the whole day's
	// quota and refills continuously over the day; a request waits for it like for the
	// per-minute buckets, within the deadline and WithMaxWait, so a spent daily quota
	// refuses at once when a deadline is set. 0 means no daily limit.
	RPD, TPD int
	// MaxConcurrent bounds the requests in flight at once.
	MaxConcurrent int
	// RequestBurst is how many requests may start at once after a quiet spell: the
	// request bucket's size, at most RPM. 0 means RPM times the burst fraction, at least 1.
	RequestBurst int
	// TokenBurst is the token bucket's size, at most TPM. 0 means TPM times the burst
	// fraction, at least 1. A request that costs more than the bucket is admitted when
	// the bucket is full and leaves a debt that later requests wait for.
	TokenBurst int
	// Metering says how the upstream charges tokens, and so how a response's reported
	// usage is reconciled. The zero value is ratelimit.MeterAdmission.
	Metering ratelimit.Metering
}

func (l Limits) zero() bool {
	return l.RPM == 0 && l.TPM == 0 && l.ITPM == 0 && l.OTPM == 0 && l.RPD == 0 && l.TPD == 0 && l.MaxConcurrent == 0
}

func (l Limits) validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int
	}{{"RPM", l.RPM}, {"TPM", l.TPM}, {"ITPM", l.ITPM}, {"OTPM", l.OTPM}, {"RPD", l.RPD}, {"TPD", l.TPD}, {"MaxConcurrent", l.MaxConcurrent},
		{"RequestBurst", l.RequestBurst}, {"TokenBurst", l.TokenBurst}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("limits: negative %s %d", f.name, f.v))
		}
	}
	if l.RequestBurst > 0 && l.RequestBurst > l.RPM {
		errs = append(errs, fmt.Errorf("limits: RequestBurst %d exceeds RPM %d", l.RequestBurst, l.RPM))
	}
	if l.TokenBurst > 0 && l.TokenBurst > l.TPM {
		errs = append(errs, fmt.Errorf("limits: TokenBurst %d exceeds TPM %d", l.TokenBurst, l.TPM))
	}
	if l.Metering > ratelimit.MeterUsage {
		errs = append(errs, fmt.Errorf("limits: unknown Metering %d", l.Metering))
	}
	return errors.Join(errs...)
}

// spec derives the store's view of l.
func (l Limits) spec(c *limiterConfig) limitstore.Spec {
	s := limitstore.Spec{MaxConcurrent: l.MaxConcurrent, BatchShare: c.batchShare}
	if l.RPM > 0 {
		s.Requests = limitstore.Rate{PerSecond: float64(l.RPM) / 60, Burst: c.burst(l.RequestBurst, l.RPM)}
	}
	if l.TPM > 0 {
		s.Tokens = limitstore.Rate{PerSecond: float64(l.TPM) / 60, Burst: c.burst(l.TokenBurst, l.TPM)}
	}
	if l.RPD > 0 {
		s.DailyRequests = limitstore.Rate{PerSecond: float64(l.RPD) / secondsPerDay, Burst: float64(l.RPD)}
	}
	if l.TPD > 0 {
		s.DailyTokens = limitstore.Rate{PerSecond: float64(l.TPD) / secondsPerDay, Burst: float64(l.TPD)}
	}
	return s
}

const secondsPerDay = 24 * 60 * 60

// Limiter defaults.
const (
	// defaultBurstFraction is the share of a per-minute quota a bucket holds: ten seconds'
	// worth, the longer of the windows Azure OpenAI checks rates over.
	defaultBurstFraction = 1.0 / 6
	// defaultBatchShare is the share of each bucket and of the concurrency slots that
	// ratelimit.Batch requests may use, keeping the rest for interactive traffic.
	defaultBatchShare = 0.8
)

// limiterConfig is the Client-wide limiter configuration.
type limiterConfig struct {
	estimator      estimate.Estimator
	reservedOutput int
	ratios         []tokenRatio
	families       []familyRule // WithModelFamily
	// ratioMemo remembers info's answers, familySet the families' calibrations (set by
	// New; nil: none).
	ratioMemo     *ratioCache
	familySet     *familySet
	mode          ratelimit.Mode
	maxWait       time.Duration
	queueTarget   time.Duration
	batchShare    float64
	burstFraction float64
	store         limitstore.Store
	partitions    partitionConfig
	// scopeDecls are the quota scopes WithQuotaScope declared; scopes their limiters and
	// the upstreams' rules and references, set by validation.
	scopeDecls []QuotaScope
	scopes     *quotaScopes
}

func defaultLimiterConfig() limiterConfig {
	return limiterConfig{
		reservedOutput: defaultReservedOutput,
		batchShare:     defaultBatchShare,
		burstFraction:  defaultBurstFraction,
		queueTarget:    defaultQueueTarget,
	}
}

func (c *limiterConfig) validate() error {
	var errs []error
	if c.reservedOutput <= 0 {
		errs = append(errs, fmt.Errorf("limiter: reserved output must be positive, got %d", c.reservedOutput))
	}
	for _, r := range c.ratios {
		if !(r.ratio >= 0.1 && r.ratio <= 10) {
			errs = append(errs, fmt.Errorf("limiter: token ratio %v for %q is outside [0.1, 10]", r.ratio, r.match))
		}
	}
	errs = append(errs, c.validateFamilies()...)
	if c.mode > ratelimit.FailFast {
		errs = append(errs, fmt.Errorf("limiter: unknown mode %d", c.mode))
	}
	if c.maxWait < 0 {
		errs = append(errs, errors.New("limiter: negative max wait"))
	}
	if c.queueTarget < 0 || c.queueTarget > time.Hour {
		errs = append(errs, fmt.Errorf("limiter: queue target %v is outside [0, 1h]", c.queueTarget))
	}
	if !(c.batchShare > 0 && c.batchShare <= 1) {
		errs = append(errs, fmt.Errorf("limiter: batch share %v is outside (0, 1]", c.batchShare))
	}
	if !(c.burstFraction > 0 && c.burstFraction <= 1) {
		errs = append(errs, fmt.Errorf("limiter: burst fraction %v is outside (0, 1]", c.burstFraction))
	}
	if err := c.partitions.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// meterTokens reports whether l limits tokens (TPM, TPD, ITPM or OTPM): the requests it
// admits need a token estimate.
func (l Limits) meterTokens() bool { return l.TPM > 0 || l.TPD > 0 || l.ITPM > 0 || l.OTPM > 0 }

// enabled reports whether any upstream or partition has a token limit: only then does the
// engine estimate each request's cost. A key that learns a token limit from its
// upstream's headers estimates its requests' cost itself (see Client.admission).
func (c *limiterConfig) enabled(cfg *config) bool {
	tokens := Limits.meterTokens
	for _, s := range c.scopeDecls {
		if tokens(s.Limits) {
			return true
		}
	}
	for i := range cfg.upstreams {
		if tokens(cfg.upstreams[i].Limits) {
			return true
		}
	}
	p := &c.partitions
	if p.on && tokens(p.limits) {
		return true
	}
	for _, l := range p.overrides {
		if tokens(l) {
			return true
		}
	}
	return false
}

// burst returns a bucket's size: explicit when set, else quota times the burst fraction.
func (c *limiterConfig) burst(explicit, quota int) float64 {
	if explicit > 0 {
		return float64(explicit)
	}
	return max(1, math.Floor(float64(quota)*c.burstFraction))
}

// open returns a new state for a scope with limits l.
func (c *limiterConfig) open(name string, l Limits) limitstore.State {
	if c.store != nil {
		return c.store.Open(name, l.spec(c))
	}
	return limitstore.NewState(l.spec(c))
}

// WithLimiterMode sets what a request does when the limiter cannot admit it at once.
// Default ratelimit.Wait: it waits its turn, in arrival order. With a deadline it is admitted
// only when its wait and the upstream's expected service time fit before the deadline,
// and otherwise fails over or returns at once; without a deadline it waits as long as the
// buckets need (a request larger than a bucket, up to the debt it leaves), unless
// WithMaxWait bounds the wait. ratelimit.FailFast never waits.
func WithLimiterMode(m ratelimit.Mode) Option {
	return optionFunc(func(c *config) { c.limiter.mode = m })
}

// WithMaxWait bounds how long a request waits in each limiter (a key's, a partition's),
// on top of the context's deadline; a longer wait fails at once with ErrRateLimited.
// Default 0: only the deadline bounds the wait.
func WithMaxWait(d time.Duration) Option {
	return optionFunc(func(c *config) { c.limiter.maxWait = d })
}

// WithQueueTarget bounds the queueing delay under sustained overload. Default 100ms;
// 0 turns it off (a request then waits while its wait and the upstream's expected service
// time fit before its deadline, first come first served). d must be in [0, 1h].
//
// A key's queue is an overload while, first come first served, requests with a deadline
// would be refused, or close to it: a request met a wait (plus the work refused early,
// which would still be queued) longer than half of what its deadline, less the expected
// service time, or WithMaxWait accepts, over at least a second (longer than a burst) and
// in the last 30 seconds. During an overload a
// request whose queue would be longer than d is refused at once with ErrRateLimited, its
// Error.AdmitAfter saying when it would have been admitted: a call that can go elsewhere
// fails over at once, another returns. The requests admitted see about the unloaded
// latency, the upstream's quota is used as before, and a large prompt is refused by the
// same test as a small one (by the queue ahead of it, not by its own size). Under 2×
// overload it keeps the median latency of the calls served within 2× the unloaded one
// with no 429s (BENCHMARKS.md). Nothing is refused while every request's queue stays
// within half of what its deadline accepts: a burst the buckets absorb, or a few workers
// that each send their next request once the last is answered, whose queue is bounded by
// their number. Requests without a deadline are never refused by it.
//
// Whatever d, a limiter answers a bounded number of refusals at once: 64 per tenth of a
// second, plus twice the calls its buckets admit in that time (counting calls of 256
// tokens where tokens bound it). Beyond that, the refusal of a call that has nowhere else
// to go returns at the end of the tenth of a second, so that a caller that sends a
// refused request again at once does not spin. Fail-fast mode is never held.
func WithQueueTarget(d time.Duration) Option {
	return optionFunc(func(c *config) { c.limiter.queueTarget = d })
}

// WithBatchShare sets the share, in (0, 1], of each bucket's rate and size and of the
// concurrency slots that ratelimit.Batch requests may use; the rest stays free for
// interactive requests. Default 0.8; 1 puts batch on equal terms.
func WithBatchShare(f float64) Option {
	return optionFunc(func(c *config) { c.limiter.batchShare = f })
}

// WithBurstFraction sets the share, in (0, 1], of a per-minute quota that a bucket holds
// when Limits.RequestBurst or Limits.TokenBurst is 0. Default 1/6.
func WithBurstFraction(f float64) Option {
	return optionFunc(func(c *config) { c.limiter.burstFraction = f })
}

// WithLimitStore sets where the limiter keeps its state. Default: in memory, private to
// the Client.
//
// With a store, every key's state is opened there, also for keys without Limits, so that
// replicas sharing the store see each other's key pauses (after a 429) and evictions
// (after a 401 or an exhausted quota) and do not call a key another replica has seen
// fail. A shared store admits every replica against one set of buckets; the limiter then
// corrects them by what the upstream's headers show (consumers outside the store, a
// charge estimated too low or too high), once per correction whichever replica sees it.
// Without a store, each Client predicts the upstream's quota from its own admissions and
// takes, from the headers, only its share of a key that other processes use too.
func WithLimitStore(s limitstore.Store) Option {
	return optionFunc(func(c *config) { c.limiter.store = s })
}
