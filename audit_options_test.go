package llmclient_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/health"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/ratelimit"
)

// auditEdge is one value given to an option, and whether its documentation accepts it.
type auditEdge struct {
	name string
	opt  llmclient.Option
	ok   bool
}

// TestAuditOptionNumericEdges gives every numeric option the edges of its documented
// range (0, negative, NaN, ±Inf, the bounds and one past them, the largest values) and
// checks that New accepts exactly what each option's documentation accepts.
func TestAuditOptionNumericEdges(t *testing.T) {
	const maxD = time.Duration(math.MaxInt64)
	nan, inf := math.NaN(), math.Inf(1)
	edges := []auditEdge{
		// WithCacheAffinity: [0, 1 MiB].
		{"CacheAffinity(0)", llmclient.WithCacheAffinity(0), true},
		{"CacheAffinity(1MiB)", llmclient.WithCacheAffinity(1 << 20), true},
		{"CacheAffinity(1MiB+1)", llmclient.WithCacheAffinity(1<<20 + 1), false},
		{"CacheAffinity(-1)", llmclient.WithCacheAffinity(-1), false},
		{"CacheAffinity(MaxInt)", llmclient.WithCacheAffinity(math.MaxInt), false},
		// WithRecoveryRamp: [0, 1h].
		{"RecoveryRamp(0)", llmclient.WithRecoveryRamp(0), true},
		{"RecoveryRamp(1h)", llmclient.WithRecoveryRamp(time.Hour), true},
		{"RecoveryRamp(1h+1)", llmclient.WithRecoveryRamp(time.Hour + 1), false},
		{"RecoveryRamp(-1)", llmclient.WithRecoveryRamp(-1), false},
		{"RecoveryRamp(MaxInt64)", llmclient.WithRecoveryRamp(maxD), false},
		// WithReservedOutput: positive.
		{"ReservedOutput(1)", llmclient.WithReservedOutput(1), true},
		{"ReservedOutput(MaxInt)", llmclient.WithReservedOutput(math.MaxInt), true},
		{"ReservedOutput(0)", llmclient.WithReservedOutput(0), false},
		{"ReservedOutput(-1)", llmclient.WithReservedOutput(-1), false},
		{"ReservedOutput(MinInt)", llmclient.WithReservedOutput(math.MinInt), false},
		// WithTokenRatio: [0.1, 10].
		{"TokenRatio(0.1)", llmclient.WithTokenRatio("x", 0.1), true},
		{"TokenRatio(10)", llmclient.WithTokenRatio("x", 10), true},
		{"TokenRatio(0)", llmclient.WithTokenRatio("x", 0), false},
		{"TokenRatio(-1)", llmclient.WithTokenRatio("x", -1), false},
		{"TokenRatio(10.01)", llmclient.WithTokenRatio("x", 10.01), false},
		{"TokenRatio(NaN)", llmclient.WithTokenRatio("x", nan), false},
		{"TokenRatio(+Inf)", llmclient.WithTokenRatio("x", inf), false},
		// WithModelFamily: ratio 0 (the family's) or [0.1, 10]; match and family non-empty.
		{"ModelFamily(0)", llmclient.WithModelFamily("x", "y", 0), true},
		{"ModelFamily(0.1)", llmclient.WithModelFamily("x", "y", 0.1), true},
		{"ModelFamily(10)", llmclient.WithModelFamily("x", "y", 10), true},
		{"ModelFamily(0.05)", llmclient.WithModelFamily("x", "y", 0.05), false},
		{"ModelFamily(-1)", llmclient.WithModelFamily("x", "y", -1), false},
		{"ModelFamily(11)", llmclient.WithModelFamily("x", "y", 11), false},
		{"ModelFamily(NaN)", llmclient.WithModelFamily("x", "y", nan), false},
		{"ModelFamily(+Inf)", llmclient.WithModelFamily("x", "y", inf), false},
		{"ModelFamily(empty match)", llmclient.WithModelFamily("", "y", 1), false},
		{"ModelFamily(empty family)", llmclient.WithModelFamily("x", "", 1), false},
		// WithWaitThreshold: not negative, a known priority.
		{"WaitThreshold(0)", llmclient.WithWaitThreshold(ratelimit.Interactive, 0), true},
		{"WaitThreshold(MaxInt64)", llmclient.WithWaitThreshold(ratelimit.Interactive, maxD), true},
		{"WaitThreshold(-1)", llmclient.WithWaitThreshold(ratelimit.Batch, -1), false},
		{"WaitThreshold(priority 9)", llmclient.WithWaitThreshold(ratelimit.Priority(9), time.Second), false},
		// WithCallBudget: [0, 24h].
		{"CallBudget(0)", llmclient.WithCallBudget(0), true},
		{"CallBudget(24h)", llmclient.WithCallBudget(24 * time.Hour), true},
		{"CallBudget(24h+1)", llmclient.WithCallBudget(24*time.Hour + 1), false},
		{"CallBudget(-1)", llmclient.WithCallBudget(-1), false},
		{"CallBudget(MaxInt64)", llmclient.WithCallBudget(maxD), false},
		// WithKeyCooldown, WithKeyEviction: positive; huge values saturate.
		{"KeyCooldown(1)", llmclient.WithKeyCooldown(1), true},
		{"KeyCooldown(MaxInt64)", llmclient.WithKeyCooldown(maxD), true},
		{"KeyCooldown(0)", llmclient.WithKeyCooldown(0), false},
		{"KeyCooldown(-1)", llmclient.WithKeyCooldown(-1), false},
		{"KeyEviction(1)", llmclient.WithKeyEviction(1), true},
		{"KeyEviction(MaxInt64)", llmclient.WithKeyEviction(maxD), true},
		{"KeyEviction(0)", llmclient.WithKeyEviction(0), false},
		{"KeyEviction(-1)", llmclient.WithKeyEviction(-1), false},
		// WithAttemptTimeout, WithFirstTokenTimeout, WithIdleTimeout, WithStreamTimeout,
		// WithMaxWait, WithMaxRetryAfter: not negative; 0 allowed.
		{"AttemptTimeout(0)", llmclient.WithAttemptTimeout(0), true},
		{"AttemptTimeout(-1)", llmclient.WithAttemptTimeout(-1), false},
		{"FirstTokenTimeout(0)", llmclient.WithFirstTokenTimeout(0), true},
		{"FirstTokenTimeout(-1)", llmclient.WithFirstTokenTimeout(-1), false},
		{"IdleTimeout(0)", llmclient.WithIdleTimeout(0), true},
		{"IdleTimeout(-1)", llmclient.WithIdleTimeout(-1), false},
		{"StreamTimeout(0)", llmclient.WithStreamTimeout(0), true},
		{"StreamTimeout(-1)", llmclient.WithStreamTimeout(-1), false},
		{"MaxWait(0)", llmclient.WithMaxWait(0), true},
		{"MaxWait(-1)", llmclient.WithMaxWait(-1), false},
		{"MaxRetryAfter(0)", llmclient.WithMaxRetryAfter(0), true},
		{"MaxRetryAfter(-1)", llmclient.WithMaxRetryAfter(-1), false},
		// WithMaxAttempts, WithMaxTotalAttempts: at least 1.
		{"MaxAttempts(1)", llmclient.WithMaxAttempts(1), true},
		{"MaxAttempts(0)", llmclient.WithMaxAttempts(0), false},
		{"MaxAttempts(MinInt)", llmclient.WithMaxAttempts(math.MinInt), false},
		{"MaxTotalAttempts(1)", llmclient.WithMaxTotalAttempts(1), true},
		{"MaxTotalAttempts(0)", llmclient.WithMaxTotalAttempts(0), false},
		// WithBackoff: 0 < initial <= max <= 24h.
		{"Backoff(1ns,1ns)", llmclient.WithBackoff(1, 1), true},
		{"Backoff(1s,24h)", llmclient.WithBackoff(time.Second, 24*time.Hour), true},
		{"Backoff(0,1s)", llmclient.WithBackoff(0, time.Second), false},
		{"Backoff(2s,1s)", llmclient.WithBackoff(2*time.Second, time.Second), false},
		{"Backoff(1s,24h+1)", llmclient.WithBackoff(time.Second, 24*time.Hour+1), false},
		// WithRetryBudget: ratio [0, 1000] not NaN, floor >= 0, ttl [10ms, 24h].
		{"RetryBudget(0,0,10ms)", llmclient.WithRetryBudget(0, 0, 10*time.Millisecond), true},
		{"RetryBudget(1000,MaxInt,24h)", llmclient.WithRetryBudget(1000, math.MaxInt, 24*time.Hour), true},
		{"RetryBudget(1000.5)", llmclient.WithRetryBudget(1000.5, 10, time.Second), false},
		{"RetryBudget(-0.1)", llmclient.WithRetryBudget(-0.1, 10, time.Second), false},
		{"RetryBudget(NaN)", llmclient.WithRetryBudget(nan, 10, time.Second), false},
		{"RetryBudget(+Inf)", llmclient.WithRetryBudget(inf, 10, time.Second), false},
		{"RetryBudget(floor -1)", llmclient.WithRetryBudget(0.3, -1, time.Second), false},
		{"RetryBudget(ttl 9ms)", llmclient.WithRetryBudget(0.3, 10, 9*time.Millisecond), false},
		{"RetryBudget(ttl 24h+1)", llmclient.WithRetryBudget(0.3, 10, 24*time.Hour+1), false},
		// WithThroughputFloor: tps [0, 100000] finite, over [0, 2m], both 0 or both positive.
		{"ThroughputFloor(0,0)", llmclient.WithThroughputFloor(0, 0), true},
		{"ThroughputFloor(100000,2m)", llmclient.WithThroughputFloor(100000, 2*time.Minute), true},
		{"ThroughputFloor(10,0)", llmclient.WithThroughputFloor(10, 0), false},
		{"ThroughputFloor(0,1s)", llmclient.WithThroughputFloor(0, time.Second), false},
		{"ThroughputFloor(100001,1s)", llmclient.WithThroughputFloor(100001, time.Second), false},
		{"ThroughputFloor(10,2m+1)", llmclient.WithThroughputFloor(10, 2*time.Minute+1), false},
		{"ThroughputFloor(-1,1s)", llmclient.WithThroughputFloor(-1, time.Second), false},
		{"ThroughputFloor(NaN,1s)", llmclient.WithThroughputFloor(nan, time.Second), false},
		{"ThroughputFloor(+Inf,1s)", llmclient.WithThroughputFloor(inf, time.Second), false},
		// WithQueueTarget: [0, 1h].
		{"QueueTarget(0)", llmclient.WithQueueTarget(0), true},
		{"QueueTarget(1h)", llmclient.WithQueueTarget(time.Hour), true},
		{"QueueTarget(1h+1)", llmclient.WithQueueTarget(time.Hour + 1), false},
		{"QueueTarget(-1)", llmclient.WithQueueTarget(-1), false},
		// WithBatchShare, WithBurstFraction: (0, 1].
		{"BatchShare(1)", llmclient.WithBatchShare(1), true},
		{"BatchShare(0)", llmclient.WithBatchShare(0), false},
		{"BatchShare(1.01)", llmclient.WithBatchShare(1.01), false},
		{"BatchShare(-0.5)", llmclient.WithBatchShare(-0.5), false},
		{"BatchShare(NaN)", llmclient.WithBatchShare(nan), false},
		{"BatchShare(+Inf)", llmclient.WithBatchShare(inf), false},
		{"BurstFraction(1)", llmclient.WithBurstFraction(1), true},
		{"BurstFraction(1e-9)", llmclient.WithBurstFraction(1e-9), true},
		{"BurstFraction(0)", llmclient.WithBurstFraction(0), false},
		{"BurstFraction(1.01)", llmclient.WithBurstFraction(1.01), false},
		{"BurstFraction(NaN)", llmclient.WithBurstFraction(nan), false},
		{"BurstFraction(-Inf)", llmclient.WithBurstFraction(math.Inf(-1)), false},
		// WithLimiterMode: a known mode.
		{"LimiterMode(FailFast)", llmclient.WithLimiterMode(ratelimit.FailFast), true},
		{"LimiterMode(9)", llmclient.WithLimiterMode(ratelimit.Mode(9)), false},
		// WithCacheStats: a non-empty name, a non-nil function.
		{"CacheStats(ok)", llmclient.WithCacheStats("c", func() health.Cache { return health.Cache{} }), true},
		{"CacheStats(empty name)", llmclient.WithCacheStats("", func() health.Cache { return health.Cache{} }), false},
		{"CacheStats(nil)", llmclient.WithCacheStats("c", nil), false},
		// WithBreaker: zero fields take their defaults; a ratio above 1 is refused.
		{"Breaker(zero)", llmclient.WithBreaker(breaker.Config{}), true},
		{"Breaker(FailureRatio 2)", llmclient.WithBreaker(breaker.Config{FailureRatio: 2}), false},
		{"Breaker(FailureRatio NaN)", llmclient.WithBreaker(breaker.Config{FailureRatio: nan}), false},
		// WithSharedBreakers needs a store that shares breakers.
		{"SharedBreakers(no store)", llmclient.WithSharedBreakers(), false},
	}
	for _, e := range edges {
		_, err := llmclient.New(up("a", fake.New(fake.Reply("ok").Forever())), e.opt)
		switch {
		case e.ok && err != nil:
			t.Errorf("%s: documented as valid, New failed: %v", e.name, err)
		case !e.ok && err == nil:
			t.Errorf("%s: documented as invalid, New accepted it", e.name)
		case !e.ok && !strings.HasPrefix(err.Error(), "llmclient: "):
			t.Errorf("%s: error %q does not start with llmclient:", e.name, err)
		}
	}
}

// TestAuditLimitsNumericEdges: every Limits field refuses a negative value in an
// upstream, a partition, a partition override and a quota scope alike; bursts above their
// quota are refused; the largest values are valid and a call under them succeeds.
func TestAuditLimitsNumericEdges(t *testing.T) {
	p := fake.New(fake.Reply("ok").Forever())
	bad := []llmclient.Limits{
		{RPM: -1}, {TPM: -1}, {ITPM: -1}, {OTPM: -1}, {RPD: -1}, {TPD: -1}, {MaxConcurrent: -1},
		{RequestBurst: -1}, {TokenBurst: -1}, {RPM: math.MinInt},
		{RPM: 10, RequestBurst: 11}, {TPM: 10, TokenBurst: 11}, {RequestBurst: 1}, {TokenBurst: 1},
		{Metering: ratelimit.Metering(9)},
	}
	for _, l := range bad {
		where := map[string]llmclient.Option{
			"upstream":  llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: p, Limits: l}),
			"scope":     llmclient.WithQuotaScope(llmclient.QuotaScope{Name: "s", Limits: l}),
			"partition": llmclient.WithPartitionLimits("tenant", l),
			"override":  llmclient.WithPartitionOverride("t1", l),
		}
		for w, opt := range where {
			opts := []llmclient.Option{opt}
			if w != "upstream" {
				opts = append(opts, up("v", p))
			}
			if w == "scope" {
				opts = append(opts, llmclient.WithUpstream(llmclient.Upstream{Name: "w", Provider: p, QuotaScopes: []string{"s"}}))
			}
			if _, err := llmclient.New(opts...); err == nil {
				t.Errorf("%s Limits %+v: accepted", w, l)
			}
		}
	}
	huge := llmclient.Limits{RPM: math.MaxInt, TPM: math.MaxInt, ITPM: math.MaxInt, OTPM: math.MaxInt,
		RPD: math.MaxInt, TPD: math.MaxInt, MaxConcurrent: math.MaxInt, RequestBurst: math.MaxInt, TokenBurst: math.MaxInt}
	c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: p, Limits: huge, QuotaScopes: []string{"s"}}),
		llmclient.WithQuotaScope(llmclient.QuotaScope{Name: "s", Limits: huge}), llmclient.WithPartitionLimits("tenant", huge))
	req := chatReq("m")
	req.MaxTokens = math.MaxInt
	req.Metadata = map[string]string{"tenant": "t"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Complete(ctx, req); err != nil {
		t.Fatalf("a call under the largest Limits: %v", err)
	}
}

// TestAuditQuotaScopeValidation: the claims of docs/limits.md on what fails New for quota
// scopes, each alone, with a valid configuration as the control.
func TestAuditQuotaScopeValidation(t *testing.T) {
	p := fake.New(fake.Reply("ok").Forever())
	upWith := func(name string, scopes ...string) llmclient.Option {
		return llmclient.WithUpstream(llmclient.Upstream{Name: name, Provider: p, QuotaScopes: scopes})
	}
	scope := func(name string, models ...string) llmclient.Option {
		return llmclient.WithQuotaScope(llmclient.QuotaScope{Name: name, Limits: llmclient.Limits{RPM: 10}, Models: models})
	}
	for _, tc := range []struct {
		name string
		opts []llmclient.Option
		ok   bool
	}{
		{"valid", []llmclient.Option{scope("s", "claude-opus-4*", "gpt-4o"), upWith("a", "s"), upWith("b", "s")}, true},
		{"declared, named by nobody", []llmclient.Option{scope("s"), upWith("a")}, true},
		{"undeclared", []llmclient.Option{upWith("a", "s")}, false},
		{"declared twice", []llmclient.Option{scope("s"), scope("s"), upWith("a", "s")}, false},
		{"listed twice", []llmclient.Option{scope("s"), upWith("a", "s", "s")}, false},
		{"empty name", []llmclient.Option{scope(""), upWith("a")}, false},
		{"empty model pattern", []llmclient.Option{scope("s", ""), upWith("a", "s")}, false},
		{"negative limits", []llmclient.Option{llmclient.WithQuotaScope(llmclient.QuotaScope{Name: "s",
			Limits: llmclient.Limits{TPD: -1}}), upWith("a", "s")}, false},
	} {
		_, err := llmclient.New(tc.opts...)
		if tc.ok != (err == nil) {
			t.Errorf("%s: New err %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

// TestAuditTransportOptionEdges: WithMaxReplayBody clamps every value to [1 KiB, 1 GiB]
// and WithRepeatWindow accepts its edges without a panic (New is not involved: transport
// options have no error path, so each must be safe for any value).
func TestAuditTransportOptionEdges(t *testing.T) {
	c := newClient(t, up("a", fake.New(fake.Reply("ok").Forever())))
	for _, n := range []int64{math.MinInt64, -1, 0, 1, 1 << 10, 1 << 30, 1<<30 + 1, math.MaxInt64} {
		_ = c.Transport(nil, llmclient.WithMaxReplayBody(n))
	}
	for _, d := range []time.Duration{math.MinInt64, -1, 0, 1, time.Hour, math.MaxInt64} {
		_ = c.Transport(nil, llmclient.WithRepeatWindow(d))
	}
}

// TestAuditSharedBreakersNeedABreakerStore: WithSharedBreakers with a store that shares
// breakers is valid; naming an upstream the Client does not have is refused.
func TestAuditSharedBreakersNeedABreakerStore(t *testing.T) {
	p := fake.New(fake.Reply("ok").Forever())
	mem := limitstore.NewMemory()
	if _, err := llmclient.New(up("a", p), llmclient.WithLimitStore(mem), llmclient.WithSharedBreakers()); err != nil {
		t.Errorf("shared breakers on a memory store: %v", err)
	}
	if _, err := llmclient.New(up("a", p), llmclient.WithLimitStore(mem), llmclient.WithSharedBreakers("nope")); err == nil {
		t.Errorf("WithSharedBreakers naming an unknown upstream: accepted")
	}
}
