package llmgateway

import (
	"math"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/ratelimit"
)

// The engine settings of the file that have no section of their own above: quota scopes,
// prompt-cache affinity, bounded queueing and the estimator's ratios, the time budget and
// throughput floor of a call, stream continuation, the breaker's recovery ramp and the
// decision table. Each maps to the llmclient option named in its comment; an absent
// field keeps the library's default, and a written one is passed on as it is (so a
// written 0 of queue_target, wait_threshold or call_budget is the option's "off").

// QuotaScopeConfig is llmclient.QuotaScope: a limit shared by several upstreams' keys (a
// Gemini project) and models (a model class), declared once and named by the upstreams in
// their quota_scopes.
type QuotaScopeConfig struct {
	Name   string        `yaml:"name"`
	Limits *LimitsConfig `yaml:"limits"`
	// Models are the upstream model names the scope covers: exact, or a prefix ending in
	// "*". Empty: every model.
	Models []string `yaml:"models"`
}

// TokenRatioConfig is llmclient.WithTokenRatio.
type TokenRatioConfig struct {
	Match string  `yaml:"match"`
	Ratio float64 `yaml:"ratio"`
}

// ModelFamilyConfig is llmclient.WithModelFamily; ratio 0 keeps the built-in one.
type ModelFamilyConfig struct {
	Match  string  `yaml:"match"`
	Family string  `yaml:"family"`
	Ratio  float64 `yaml:"ratio"`
}

// ThroughputFloorConfig is llmclient.WithThroughputFloor: a stream slower than
// tokens_per_second over its first `over` is cut and fails over. Default off.
type ThroughputFloorConfig struct {
	TokensPerSecond float64  `yaml:"tokens_per_second"`
	Over            Duration `yaml:"over"`
}

// WaitThresholdConfig is llmclient.WithWaitThreshold per priority (interactive, or batch
// for a request whose x-llmclient-priority header says batch); absent keeps the default
// (2s).
type WaitThresholdConfig struct {
	Interactive *Duration `yaml:"interactive"`
	Batch       *Duration `yaml:"batch"`
}

// StreamsConfig sets what the gateway's streams do when they break.
type StreamsConfig struct {
	// Continuation continues a stream cut after its first token on the next upstream,
	// as one answer (llmclient.WithStreamContinuation). Default true.
	Continuation *bool `yaml:"continuation"`
	// KeepAliveResetsIdle makes keep-alives reset the idle timeout
	// (llmclient.WithKeepAliveResetsIdle). Default false.
	KeepAliveResetsIdle bool `yaml:"keepalive_resets_idle"`
	// ThroughputFloor cuts streams slower than a floor; see ThroughputFloorConfig.
	ThroughputFloor *ThroughputFloorConfig `yaml:"throughput_floor"`
}

// DecisionConfig is one row of the decision table (llmclient.Decision): what the engine
// does with a class of failure. A row given replaces the default row whole.
type DecisionConfig struct {
	Retry           bool `yaml:"retry"`
	FailoverFirst   bool `yaml:"failover_first"`
	NoBackoff       bool `yaml:"no_backoff"`
	NextKey         bool `yaml:"next_key"`
	Failover        bool `yaml:"failover"`
	ContextFallback bool `yaml:"context_fallback"`
	ContentFallback bool `yaml:"content_fallback"`
	GrowOutput      bool `yaml:"grow_output"`
	Breaker         bool `yaml:"breaker"`
	Cooldown        bool `yaml:"cooldown"`
	Evict           bool `yaml:"evict"`
	Alert           bool `yaml:"alert"`
}

func (d DecisionConfig) decision() llmclient.Decision {
	return llmclient.Decision{
		Retry: d.Retry, FailoverFirst: d.FailoverFirst, NoBackoff: d.NoBackoff, NextKey: d.NextKey,
		Failover: d.Failover, ContextFallback: d.ContextFallback, ContentFallback: d.ContentFallback,
		GrowOutput: d.GrowOutput, Breaker: d.Breaker, Cooldown: d.Cooldown, Evict: d.Evict, Alert: d.Alert,
	}
}

// classByName maps failure.Class names ("rate_limited") to classes, none excluded.
var classByName = func() map[string]failure.Class {
	m := map[string]failure.Class{}
	for c := failure.Unknown; ; c++ {
		name := c.String()
		if len(name) > 6 && name[:6] == "class(" {
			return m
		}
		m[name] = c
	}
}()

// validateEngine checks the settings of this file's types, adding each problem to p.
func (c *Config) validateEngine(p *problems) {
	scopes := map[string]bool{}
	for i := range c.QuotaScopes {
		s := &c.QuotaScopes[i]
		w := p.named(scopes, "quota_scopes", i, s.Name)
		if s.Limits == nil {
			p.add("%s: limits: required", w)
		}
		s.Limits.check(p, w+": limits")
		for _, m := range s.Models {
			if m == "" || m == "*" && len(s.Models) > 1 {
				p.add("%s: models: %q is not a model name or prefix*", w, m)
			}
		}
	}
	for i := range c.Upstreams {
		for _, n := range c.Upstreams[i].QuotaScopes {
			if !scopes[n] {
				p.add("upstream %q: quota_scopes: unknown scope %q", c.Upstreams[i].Name, n)
			}
		}
	}
	if c.CacheAffinity < 0 || c.CacheAffinity > 1<<20 {
		p.add("cache_affinity: %d bytes is outside [0, 1048576]", c.CacheAffinity)
	}
	l := c.Limiter
	if l.QueueTarget != nil && (*l.QueueTarget < 0 || l.QueueTarget.D() > time.Hour) {
		p.add("limiter.queue_target: must be within [0, 1h]")
	}
	if l.BatchShare != nil && !(*l.BatchShare > 0 && *l.BatchShare <= 1) {
		p.add("limiter.batch_share: must be in (0, 1]")
	}
	if w := l.WaitThreshold; (w.Interactive != nil && *w.Interactive < 0) || (w.Batch != nil && *w.Batch < 0) {
		p.add("limiter.wait_threshold: must not be negative")
	}
	for i, r := range l.TokenRatios {
		if r.Match == "" || !(r.Ratio >= 0.1 && r.Ratio <= 10) {
			p.add("limiter.token_ratios[%d]: needs a match and a ratio within [0.1, 10]", i)
		}
	}
	for i, f := range l.ModelFamilies {
		if f.Match == "" || f.Family == "" || !(f.Ratio == 0 || f.Ratio >= 0.1 && f.Ratio <= 10) {
			p.add("limiter.model_families[%d]: needs a match, a family and a ratio of 0 or within [0.1, 10]", i)
		}
	}
	if b := c.Timeouts.CallBudget; b != nil && (*b < 0 || b.D() > 24*time.Hour) {
		p.add("timeouts.call_budget: must be within [0, 24h]")
	}
	if f := c.Streams.ThroughputFloor; f != nil {
		if math.IsNaN(f.TokensPerSecond) || f.TokensPerSecond <= 0 || f.TokensPerSecond > 100000 || f.Over <= 0 || f.Over.D() > 2*time.Minute {
			p.add("streams.throughput_floor: tokens_per_second must be within (0, 100000] and over within (0, 2m]")
		}
	}
	if b := c.Breaker; b != nil && (b.RecoveryRamp < 0 || b.RecoveryRamp.D() > time.Hour) {
		p.add("breaker.recovery_ramp: must be within [0, 1h]")
	}
	for name := range c.Decisions {
		if _, ok := classByName[name]; !ok {
			p.add("decisions: %q is not a failure class (rate_limited, server_error, timeout, …)", name)
		}
	}
}

// engineOptions turns this file's settings into the Client's options.
func (c *Config) engineOptions() []llmclient.Option {
	var opts []llmclient.Option
	for _, s := range c.QuotaScopes {
		opts = append(opts, llmclient.WithQuotaScope(llmclient.QuotaScope{Name: s.Name, Limits: s.Limits.limits(), Models: s.Models}))
	}
	if c.CacheAffinity > 0 {
		opts = append(opts, llmclient.WithCacheAffinity(c.CacheAffinity))
	}
	l := c.Limiter
	if l.QueueTarget != nil {
		opts = append(opts, llmclient.WithQueueTarget(l.QueueTarget.D()))
	}
	if l.BatchShare != nil {
		opts = append(opts, llmclient.WithBatchShare(*l.BatchShare))
	}
	if d := l.WaitThreshold.Interactive; d != nil {
		opts = append(opts, llmclient.WithWaitThreshold(ratelimit.Interactive, d.D()))
	}
	if d := l.WaitThreshold.Batch; d != nil {
		opts = append(opts, llmclient.WithWaitThreshold(ratelimit.Batch, d.D()))
	}
	for _, r := range l.TokenRatios {
		opts = append(opts, llmclient.WithTokenRatio(r.Match, r.Ratio))
	}
	for _, f := range l.ModelFamilies {
		opts = append(opts, llmclient.WithModelFamily(f.Match, f.Family, f.Ratio))
	}
	if b := c.Timeouts.CallBudget; b != nil {
		opts = append(opts, llmclient.WithCallBudget(b.D()))
	}
	s := c.Streams
	if s.Continuation != nil {
		opts = append(opts, llmclient.WithStreamContinuation(*s.Continuation))
	}
	if s.KeepAliveResetsIdle {
		opts = append(opts, llmclient.WithKeepAliveResetsIdle(true))
	}
	if f := s.ThroughputFloor; f != nil {
		opts = append(opts, llmclient.WithThroughputFloor(f.TokensPerSecond, f.Over.D()))
	}
	if b := c.Breaker; b != nil && b.RecoveryRamp > 0 {
		opts = append(opts, llmclient.WithRecoveryRamp(b.RecoveryRamp.D()))
	}
	for _, u := range c.Upstreams {
		if u.Prefill != nil {
			opts = append(opts, llmclient.WithPrefill(u.Name, *u.Prefill))
		}
	}
	for _, name := range sortedKeys(c.Decisions) {
		opts = append(opts, llmclient.WithDecision(classByName[name], c.Decisions[name].decision()))
	}
	return opts
}
