package llmgateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is the gateway's configuration file, in YAML or JSON (JSON is read as YAML).
// Secrets never appear in it: API keys, tenant keys, the admin token and the Redis
// password are named by environment variables, read when the file is loaded. sample.yaml
// shows the usual sections; docs/gateway.md lists every key and the rule for a zero or
// absent value. Unknown fields are errors.
type Config struct {
	// Listen is the address of the API listener. Default "127.0.0.1:8080".
	Listen string `yaml:"listen"`
	// MaxRequestBytes bounds a request body; a larger one is refused with 413.
	// Default 4 MiB.
	MaxRequestBytes int64 `yaml:"max_request_bytes"`
	// ShutdownGrace is how long a shutdown waits for requests in flight, open streams
	// included, before it cuts them. Default 30s.
	ShutdownGrace Duration `yaml:"shutdown_grace"`
	// Open serves requests without a tenant key (or with a key no tenant has), as the
	// tenant OpenTenant ("-") with every model allowed: one partition for all of them,
	// under TenantLimits and each_tenant budgets like any tenant without limits of its
	// own. A reload may change it. Default false: Tenants is required.
	Open bool `yaml:"open"`
	// Procs is how many threads run Go code at once (GOMAXPROCS) in the llmgateway
	// command, set when it starts; a reload cannot change it, and the GOMAXPROCS
	// environment variable overrides it. New does not read it: a program that embeds
	// the Gateway owns its runtime. 1 spends less CPU per request (no second thread
	// woken to share each request's work) but serves at most one core's worth and,
	// on a busy machine, queues requests behind one another (BENCHMARKS.md §16).
	// Default 0: Go's default, the CPUs available. At most 1024 (maxProcs): the runtime
	// sets no bound of its own and allocates every one.
	Procs int `yaml:"procs"`

	Admin     AdminConfig      `yaml:"admin"`
	Log       LogConfig        `yaml:"log"`
	Upstreams []UpstreamConfig `yaml:"upstreams"`
	Groups    []GroupConfig    `yaml:"groups"`
	Tenants   []TenantConfig   `yaml:"tenants"`
	// TenantLimits are the limits of every tenant without its own Limits. Default none.
	TenantLimits *LimitsConfig  `yaml:"tenant_limits"`
	Budgets      []BudgetConfig `yaml:"budgets"`
	Retry        RetryConfig    `yaml:"retry"`
	Timeouts     TimeoutConfig  `yaml:"timeouts"`
	Limiter      LimiterConfig  `yaml:"limiter"`
	Breaker      *BreakerConfig `yaml:"breaker"`
	Fallbacks    FallbackConfig `yaml:"fallbacks"`
	Pricing      PricingConfig  `yaml:"pricing"`
	Cache        CacheConfig    `yaml:"cache"`
	Redis        *RedisConfig   `yaml:"redis"`
	Metrics      MetricsConfig  `yaml:"metrics"`
	Headers      HeadersConfig  `yaml:"headers"`
	// QuotaScopes are limits shared across upstreams' keys and models (config_engine.go).
	QuotaScopes []QuotaScopeConfig `yaml:"quota_scopes"`
	// CacheAffinity is llmclient.WithCacheAffinity's prefix in bytes: requests sharing
	// that prefix (or an OpenAI prompt_cache_key) go to the same upstream and key. 0 (the
	// default) is off.
	CacheAffinity int `yaml:"cache_affinity"`
	// Streams sets continuation, keep-alives and the throughput floor.
	Streams StreamsConfig `yaml:"streams"`
	// Decisions replace rows of the decision table, by failure class name.
	Decisions map[string]DecisionConfig `yaml:"decisions"`
	source    string                    // the file it was read from
	raw       []byte                    // its contents
	env       func(string) (string, bool)
}

// maxProcs bounds Config.Procs.
const maxProcs = 1024

// AdminConfig configures the admin listener.
type AdminConfig struct {
	// Listen is the admin listener's address; "" serves no admin API (and no /metrics).
	Listen string `yaml:"listen"`
	// TokenEnv names the environment variable that holds the admin bearer token.
	// Required with Listen.
	TokenEnv string `yaml:"token_env"`
	token    string
}

// LogConfig configures the access log.
type LogConfig struct {
	// Level is debug, info, warn or error. Default info.
	Level string `yaml:"level"`
	// Format is json or text. Default json.
	Format string `yaml:"format"`
}

// UpstreamConfig is one upstream: a vendor endpoint with its keys and limits.
type UpstreamConfig struct {
	Name string `yaml:"name"`
	// Vendor is openai (also any OpenAI-compatible server, by BaseURL), azure,
	// anthropic or gemini.
	Vendor string `yaml:"vendor"`
	// BaseURL overrides the vendor's API base URL.
	BaseURL string `yaml:"base_url"`
	// KeysEnv names the environment variables holding the upstream's API keys, pooled
	// in order. Each must be set and not empty.
	KeysEnv []string `yaml:"keys_env"`
	// Models maps a request's model name to the upstream's; empty (left out or {})
	// serves every model under its own name.
	Models map[string]string `yaml:"models"`
	Limits *LimitsConfig     `yaml:"limits"`
	// QuotaScopes name the quota_scopes this upstream's calls also count against.
	QuotaScopes []string `yaml:"quota_scopes"`
	// Prefill says whether the upstream accepts a prefilled answer, for continuing a
	// broken stream (llmclient.WithPrefill). Default: the vendor adapter says.
	Prefill *bool `yaml:"prefill"`
	// Timeout bounds each one-shot attempt; 0 uses timeouts.attempt.
	Timeout Duration `yaml:"timeout"`
	// Weight is the share under weighted routing; 0 counts as 1.
	Weight int `yaml:"weight"`
	// PriceProvider names the provider in the price table ("openai", "deepseek").
	PriceProvider string `yaml:"price_provider"`
	// Headers are sent with every request to the upstream (no credentials here).
	Headers map[string]string `yaml:"headers"`
	// Azure: the resource endpoint and API version (vendor azure).
	AzureEndpoint   string `yaml:"azure_endpoint"`
	AzureAPIVersion string `yaml:"azure_api_version"`
	// MaxTokensField is openai's name for the output bound: max_tokens or
	// max_completion_tokens. Default: the adapter's, max_completion_tokens for
	// api.openai.com and Azure, max_tokens for any other base_url.
	MaxTokensField string `yaml:"max_tokens_field"`
	// StreamUsage asks OpenAI-compatible upstreams for the usage chunk. Default true.
	StreamUsage *bool `yaml:"stream_usage"`
	keys        []string
}

// LimitsConfig is llmclient.Limits in the file.
type LimitsConfig struct {
	RPM           int    `yaml:"rpm"`
	TPM           int    `yaml:"tpm"`
	ITPM          int    `yaml:"itpm"` // input tokens per minute (Anthropic)
	OTPM          int    `yaml:"otpm"` // output tokens per minute (Anthropic)
	RPD           int    `yaml:"rpd"`
	TPD           int    `yaml:"tpd"`
	MaxConcurrent int    `yaml:"max_concurrent"`
	RequestBurst  int    `yaml:"request_burst"`
	TokenBurst    int    `yaml:"token_burst"`
	Metering      string `yaml:"metering"`
}

// GroupConfig is a model group: a name requests use, served by upstreams in order.
type GroupConfig struct {
	Name      string   `yaml:"name"`
	Upstreams []string `yaml:"upstreams"`
	// Routing is ordered (default), weighted, least_in_flight or latency.
	Routing string `yaml:"routing"`
	// Fallback names groups tried after this one's upstreams.
	Fallback []string `yaml:"fallback"`
	// Hedge sends a second attempt to the next upstream after this delay (a duration
	// such as "1.5s", or a number of seconds); "auto" uses the observed 95th percentile.
	// Default off.
	Hedge string `yaml:"hedge"`
}

// TenantConfig maps gateway API keys to a tenant: a partition with its own limits
// and budgets, and the models it may call.
type TenantConfig struct {
	Name string `yaml:"name"`
	// KeysEnv names the environment variables holding the tenant's gateway keys.
	KeysEnv []string `yaml:"keys_env"`
	// Models are the model or group names the tenant may call; a pattern of path.Match
	// ("gpt-4o*") or "*" for every one. Required.
	Models []string `yaml:"models"`
	// Limits replace tenant_limits for this tenant; all zero exempts it.
	Limits *LimitsConfig `yaml:"limits"`
	keys   []string
}

// BudgetConfig is one spend cap (package budget).
type BudgetConfig struct {
	Name string `yaml:"name"`
	// Scope is client (default), each_tenant, tenant:NAME, upstream:NAME or model:NAME.
	Scope string `yaml:"scope"`
	// Window is hourly, daily (default), monthly or rolling:DURATION ("rolling:1h").
	Window string `yaml:"window"`
	// TimeZone is the calendar windows' IANA zone. Default UTC.
	TimeZone string `yaml:"time_zone"`
	// CapUSD is the hard cap per window in US dollars; required, positive.
	CapUSD float64 `yaml:"cap_usd"`
	// Soft are fractions of the cap that emit an alert when reached.
	Soft []float64 `yaml:"soft"`
	// Reroute names the group refused calls move to instead of failing.
	Reroute string `yaml:"reroute"`
	// UnpricedUSD charges this much for each call whose model has no price; 0 refuses
	// such calls.
	UnpricedUSD float64 `yaml:"unpriced_usd"`
}

// RetryConfig bounds retries.
type RetryConfig struct {
	MaxAttempts      int      `yaml:"max_attempts"`
	MaxTotalAttempts int      `yaml:"max_total_attempts"`
	BackoffInitial   Duration `yaml:"backoff_initial"`
	BackoffMax       Duration `yaml:"backoff_max"`
	MaxRetryAfter    Duration `yaml:"max_retry_after"`
	// BudgetRatio, BudgetFloor and BudgetWindow set the retry budget (all three, or none).
	BudgetRatio  *float64 `yaml:"budget_ratio"`
	BudgetFloor  int      `yaml:"budget_floor"`
	BudgetWindow Duration `yaml:"budget_window"`
	KeyCooldown  Duration `yaml:"key_cooldown"`
	KeyEviction  Duration `yaml:"key_eviction"`
}

// TimeoutConfig sets the call's timeouts; 0 or absent keeps the library's default,
// except call_budget, where a written 0 turns the time budget off.
type TimeoutConfig struct {
	// Request bounds a whole request, a stream included, from its arrival: the context
	// deadline the gateway gives each call, by which the request's body must also have
	// arrived (else 408; without Request, within a minute).
	Request    Duration `yaml:"request"`
	Attempt    Duration `yaml:"attempt"`
	FirstToken Duration `yaml:"first_token"`
	// Idle is the library's idle timeout (llmclient.WithIdleTimeout); it also bounds
	// each write to the caller (a minute without it), so that one that stops reading
	// is cut.
	Idle   Duration `yaml:"idle"`
	Stream Duration `yaml:"stream"`
	// CallBudget bounds a call whose request sets no deadline (llmclient.WithCallBudget);
	// requests get timeouts.request as their deadline when it is set.
	CallBudget *Duration `yaml:"call_budget"`
}

// LimiterConfig sets how the limiters wait.
type LimiterConfig struct {
	// Mode is wait (default) or fail_fast.
	Mode           string   `yaml:"mode"`
	MaxWait        Duration `yaml:"max_wait"`
	BurstFraction  float64  `yaml:"burst_fraction"`
	ReservedOutput int      `yaml:"reserved_output"`
	// QueueTarget bounds the limiter's queueing delay under overload
	// (llmclient.WithQueueTarget).
	QueueTarget *Duration `yaml:"queue_target"`
	// BatchShare is the share of each limit batch requests (x-llmclient-priority: batch)
	// may use (WithBatchShare).
	BatchShare *float64 `yaml:"batch_share"`
	// WaitThreshold is the longest wait on an upstream while another could serve.
	WaitThreshold WaitThresholdConfig `yaml:"wait_threshold"`
	// TokenRatios and ModelFamilies correct the prompt estimates per model.
	TokenRatios   []TokenRatioConfig  `yaml:"token_ratios"`
	ModelFamilies []ModelFamilyConfig `yaml:"model_families"`
}

// BreakerConfig is breaker.Config in the file; a zero field keeps its default.
type BreakerConfig struct {
	Window              Duration `yaml:"window"`
	MinRequests         int      `yaml:"min_requests"`
	FailureRatio        float64  `yaml:"failure_ratio"`
	ConsecutiveFailures int      `yaml:"consecutive_failures"`
	OpenTimeout         Duration `yaml:"open_timeout"`
	MaxOpenTimeout      Duration `yaml:"max_open_timeout"`
	HalfOpenProbes      int      `yaml:"half_open_probes"`
	// RecoveryRamp paces calls after the breaker closes (llmclient.WithRecoveryRamp).
	RecoveryRamp Duration `yaml:"recovery_ramp"`
	// Shared names the upstreams whose breakers replicas share through redis
	// (["*"], alone, for every one).
	Shared []string `yaml:"shared"`
}

// FallbackConfig names the upstreams tried for the classes no ordinary failover serves.
type FallbackConfig struct {
	// Context are larger-context upstreams for a prompt too long for its route.
	Context []string `yaml:"context"`
	// Content are upstreams tried after a content filter.
	Content []string `yaml:"content"`
}

// PricingConfig points at a price table file (pricing.LoadFile), which turns pricing on;
// empty uses the embedded table once a budget turns pricing on. Without a file or a
// budget every cost is unknown (the access log then has no cost_usd).
type PricingConfig struct {
	File string `yaml:"file"`
}

// CacheConfig configures the exact response cache.
type CacheConfig struct {
	Enabled bool     `yaml:"enabled"`
	TTL     Duration `yaml:"ttl"`
	// MaxBytes and MaxEntries bound the in-memory cache; with Redis there is none, and
	// setting them is an error.
	MaxBytes   int64 `yaml:"max_bytes"`
	MaxEntries int   `yaml:"max_entries"`
	// Dedup joins identical requests in flight. Default false.
	Dedup bool `yaml:"dedup"`
	// Redis keeps entries in redis (rediscache) instead of memory.
	Redis bool `yaml:"redis"`
}

// RedisConfig connects the replicas' shared state: limits, key pauses, budgets,
// breakers (breaker.shared) and the cache (cache.redis).
type RedisConfig struct {
	Addr        string `yaml:"addr"`
	PasswordEnv string `yaml:"password_env"`
	DB          int    `yaml:"db"`
	Prefix      string `yaml:"prefix"`
	// FailMode is open (default: admit on local limits while redis is down) or closed.
	FailMode string `yaml:"fail_mode"`
	// Timeout bounds each round trip to redis (default 100ms); a reply slower than a
	// quarter of it also sends the stores to their fallback for a moment (redisstore's
	// WithTimeout): set it to four times the slowest reply that counts as redis answering.
	Timeout  Duration `yaml:"timeout"`
	password string
}

// MetricsConfig configures /metrics on the admin listener.
type MetricsConfig struct {
	// Disabled turns /metrics off.
	Disabled bool `yaml:"disabled"`
}

// HeadersConfig names what the gateway reads from requests.
type HeadersConfig struct {
	// RequestID is the header carrying the caller's request id, echoed back; a new id
	// is made when it is absent. Default "x-request-id".
	RequestID string `yaml:"request_id"`
}

// Duration is a time.Duration written as "1.5s", "200ms" or "2m" (or a number of
// seconds).
type Duration time.Duration

// UnmarshalYAML reads a duration string or a number of seconds.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: a duration must be a string such as \"1.5s\"", n.Line)
	}
	v, err := parseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// parseDuration reads a duration of the file: "1.5s", "200ms", "2m", or a number of
// seconds ("90", "0.5"); "" is 0.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return 0, nil
	}
	if v, err := time.ParseDuration(s); err == nil {
		return v, nil
	}
	// The whole value is a number of seconds: "2 hours" or "5x" is not read as 2 or 5.
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) && math.Abs(f) < 1e9 {
		return time.Duration(f * float64(time.Second)), nil
	}
	return 0, fmt.Errorf("%q is not a duration", s)
}

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// LoadFile reads, resolves and validates the configuration file at path, reading
// secrets with env (nil means os.LookupEnv). It reports every problem in one error.
func LoadFile(file string, env func(string) (string, bool)) (*Config, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("llmgateway: %w", err)
	}
	return parseFile(file, data, env)
}

// parseFile is LoadFile of data, read from file.
func parseFile(file string, data []byte, env func(string) (string, bool)) (*Config, error) {
	c, err := Parse(data, env)
	if err != nil {
		return nil, fmt.Errorf("llmgateway: %s: %w", file, err)
	}
	c.source, c.raw = file, data
	return c, nil
}

// Parse reads a configuration from YAML or JSON (one document), resolves its secrets
// with env (nil means os.LookupEnv) and validates it as a whole, llmclient.New's own
// checks of the Client it describes included: the error lists every problem.
func Parse(data []byte, env func(string) (string, bool)) (*Config, error) {
	if env == nil {
		env = os.LookupEnv
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	c := &Config{}
	if err := dec.Decode(c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the configuration is empty")
		}
		return nil, err
	}
	// A configuration is one document: what follows a "---" would be silently dropped.
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("line %d: the file holds more than one YAML document; a configuration is one", next.Line)
	}
	c.env = env
	c.defaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) defaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = 4 << 20
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = Duration(30 * time.Second)
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "json"
	}
	if c.Headers.RequestID == "" {
		c.Headers.RequestID = "x-request-id"
	}
	for i := range c.Upstreams {
		// models: {} is empty, as one left out: every model under its own name (a
		// non-nil map would tell the Client to serve only what it maps: nothing).
		if u := &c.Upstreams[i]; len(u.Models) == 0 {
			u.Models = nil
		}
	}
}

// problems collects every validation problem.
type problems []string

func (p *problems) add(format string, a ...any) { *p = append(*p, fmt.Sprintf(format, a...)) }

// named checks the name of entry i of the list called list ("upstreams", "groups", …),
// whose names must be given and unique (seen holds those met so far), and returns how the
// problems of that entry begin: `group "chat"`, or `groups[2]` for one without a name.
func (p *problems) named(seen map[string]bool, list string, i int, name string) string {
	w := fmt.Sprintf("%s %q", strings.TrimSuffix(list, "s"), name)
	switch {
	case name == "":
		w = fmt.Sprintf("%s[%d]", list, i)
		p.add("%s: name is required", w)
	case seen[name]:
		p.add("%s: the name is used twice", w)
	}
	seen[name] = true
	return w
}

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return fmt.Errorf("%d problem(s):\n  - %s", len(p), strings.Join(p, "\n  - "))
}

func (c *Config) secret(p *problems, what, name string) string {
	if name == "" {
		p.add("%s: an environment variable name is required", what)
		return ""
	}
	v, ok := c.env(name)
	if !ok || v == "" {
		p.add("%s: environment variable %s is not set", what, name)
		return ""
	}
	return v
}

func (c *Config) validate() error {
	var p problems
	if c.MaxRequestBytes < 0 {
		p.add("max_request_bytes: must not be negative")
	}
	if c.ShutdownGrace < 0 {
		p.add("shutdown_grace: must not be negative")
	}
	if c.Procs < 0 {
		p.add("procs: must not be negative")
	} else if c.Procs > maxProcs {
		p.add("procs: %d is more than %d", c.Procs, maxProcs)
	}
	if c.Admin.Listen != "" {
		c.Admin.token = c.secret(&p, "admin.token_env", c.Admin.TokenEnv)
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		p.add("log.level: %q is not debug, info, warn or error", c.Log.Level)
	}
	if c.Log.Format != "json" && c.Log.Format != "text" {
		p.add("log.format: %q is not json or text", c.Log.Format)
	}
	ups := map[string]bool{}
	if len(c.Upstreams) == 0 {
		p.add("upstreams: at least one is required")
	}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		w := p.named(ups, "upstreams", i, u.Name)
		switch u.Vendor {
		case "openai", "anthropic", "gemini":
		case "azure":
			if u.AzureEndpoint == "" || u.AzureAPIVersion == "" {
				p.add("%s: vendor azure needs azure_endpoint and azure_api_version", w)
			}
		case "":
			p.add("%s: vendor is required (openai, azure, anthropic or gemini)", w)
		default:
			p.add("%s: vendor %q is not openai, azure, anthropic or gemini", w, u.Vendor)
		}
		if u.MaxTokensField != "" && u.MaxTokensField != "max_tokens" && u.MaxTokensField != "max_completion_tokens" {
			p.add("%s: max_tokens_field %q is not max_tokens or max_completion_tokens", w, u.MaxTokensField)
		}
		u.keys = u.keys[:0]
		for _, k := range u.KeysEnv {
			if v := c.secret(&p, w+": keys_env", k); v != "" {
				u.keys = append(u.keys, v)
			}
		}
		if u.Timeout < 0 {
			p.add("%s: timeout must not be negative", w)
		}
		if u.Weight < 0 {
			p.add("%s: weight must not be negative", w)
		}
		for k, v := range u.Models {
			if k == "" || v == "" {
				p.add("%s: models: empty model name", w)
			}
		}
		u.Limits.check(&p, w+": limits")
	}
	groups := map[string]bool{}
	for i, g := range c.Groups {
		w := p.named(groups, "groups", i, g.Name)
		if len(g.Upstreams) == 0 {
			p.add("%s: upstreams: at least one is required", w)
		}
		for _, n := range g.Upstreams {
			if !ups[n] {
				p.add("%s: unknown upstream %q", w, n)
			}
		}
		if _, ok := routings[g.Routing]; !ok {
			p.add("%s: routing %q is not ordered, weighted, least_in_flight or latency", w, g.Routing)
		}
		if g.Hedge != "" && g.Hedge != "auto" {
			if d, err := parseDuration(g.Hedge); err != nil || d <= 0 {
				p.add("%s: hedge %q is not auto or a positive duration", w, g.Hedge)
			}
		}
	}
	for _, g := range c.Groups {
		for _, f := range g.Fallback {
			if !groups[f] {
				p.add("group %q: fallback: unknown group %q", g.Name, f)
			}
		}
	}
	if !c.Open && len(c.Tenants) == 0 {
		p.add("tenants: at least one is required (or open: true to serve without keys)")
	}
	tenants := map[string]bool{}
	keyOwner := map[string]string{}
	for i := range c.Tenants {
		t := &c.Tenants[i]
		w := p.named(tenants, "tenants", i, t.Name)
		if t.Name == OpenTenant {
			p.add("%s: the name is reserved for the callers without a key (open: true)", w)
		}
		if len(t.KeysEnv) == 0 {
			p.add("%s: keys_env: at least one is required", w)
		}
		t.keys = t.keys[:0]
		for _, k := range t.KeysEnv {
			v := c.secret(&p, w+": keys_env", k)
			if v == "" {
				continue
			}
			if o, dup := keyOwner[v]; dup {
				p.add("%s: keys_env %s holds a key of tenant %q too", w, k, o)
			}
			keyOwner[v] = t.Name
			t.keys = append(t.keys, v)
		}
		if len(t.Models) == 0 {
			p.add("%s: models: at least one pattern is required (\"*\" for every model)", w)
		}
		for _, m := range t.Models {
			if _, err := path.Match(m, ""); err != nil || m == "" {
				p.add("%s: models: %q is not a pattern", w, m)
			}
		}
		t.Limits.check(&p, w+": limits")
	}
	c.TenantLimits.check(&p, "tenant_limits")
	budgets := map[string]bool{}
	for i, b := range c.Budgets {
		w := p.named(budgets, "budgets", i, b.Name)
		if _, err := b.build(); err != nil {
			p.add("%s: %v", w, err)
		}
		kind, name, _ := strings.Cut(b.Scope, ":")
		switch kind {
		case "upstream":
			if !ups[name] {
				p.add("%s: scope: unknown upstream %q", w, name)
			}
		case "tenant":
			if !tenants[name] {
				p.add("%s: scope: unknown tenant %q", w, name)
			}
		}
		if b.Reroute != "" && !groups[b.Reroute] {
			p.add("%s: reroute: unknown group %q", w, b.Reroute)
		}
	}
	r := c.Retry
	if r.MaxAttempts < 0 || r.MaxTotalAttempts < 0 {
		p.add("retry: max_attempts and max_total_attempts must not be negative")
	}
	if r.BackoffInitial < 0 || r.BackoffMax < 0 || r.MaxRetryAfter < 0 || r.KeyCooldown < 0 || r.KeyEviction < 0 {
		p.add("retry: durations must not be negative")
	}
	if (r.BackoffInitial == 0) != (r.BackoffMax == 0) {
		p.add("retry: backoff_initial and backoff_max go together")
	}
	if r.BudgetRatio != nil && (!(*r.BudgetRatio >= 0 && *r.BudgetRatio <= 1000) || r.BudgetFloor < 0 ||
		r.BudgetWindow.D() < 10*time.Millisecond || r.BudgetWindow.D() > 24*time.Hour) {
		p.add("retry: budget_ratio needs a ratio in [0, 1000], budget_floor ≥ 0 and a budget_window in [10ms, 24h]")
	} else if r.BudgetRatio == nil && (r.BudgetFloor != 0 || r.BudgetWindow != 0) {
		p.add("retry: budget_floor and budget_window need budget_ratio")
	}
	t := c.Timeouts
	if t.Request < 0 || t.Attempt < 0 || t.FirstToken < 0 || t.Idle < 0 || t.Stream < 0 {
		p.add("timeouts: must not be negative")
	}
	switch c.Limiter.Mode {
	case "", "wait", "fail_fast":
	default:
		p.add("limiter.mode: %q is not wait or fail_fast", c.Limiter.Mode)
	}
	if c.Limiter.MaxWait < 0 || c.Limiter.ReservedOutput < 0 || math.IsNaN(c.Limiter.BurstFraction) || c.Limiter.BurstFraction < 0 || c.Limiter.BurstFraction > 1 {
		p.add("limiter: max_wait and reserved_output must not be negative, burst_fraction in [0, 1]")
	}
	if b := c.Breaker; b != nil {
		if _, err := b.build(); err != nil {
			p.add("breaker: %v", err)
		}
		for _, n := range b.Shared {
			if n != "*" && !ups[n] {
				p.add("breaker.shared: unknown upstream %q", n)
			}
		}
		if len(b.Shared) > 1 && slices.Contains(b.Shared, "*") {
			p.add(`breaker.shared: "*" shares every upstream's breaker and goes alone, without names`)
		}
		if len(b.Shared) > 0 && c.Redis == nil {
			p.add("breaker.shared: needs redis")
		}
	}
	for _, n := range append(slices.Clone(c.Fallbacks.Context), c.Fallbacks.Content...) {
		if !ups[n] {
			p.add("fallbacks: unknown upstream %q", n)
		}
	}
	if c.Cache.TTL < 0 || c.Cache.MaxBytes < 0 || c.Cache.MaxEntries < 0 {
		p.add("cache: must not be negative")
	}
	if c.Cache.Redis && c.Redis == nil {
		p.add("cache.redis: needs redis")
	}
	if c.Cache.Redis && (c.Cache.MaxBytes != 0 || c.Cache.MaxEntries != 0) {
		// rediscache has no bound of its own: entries leave redis by their TTL.
		p.add("cache: max_bytes and max_entries bound the in-memory cache; with redis: true there is none (entries expire by ttl)")
	}
	if rc := c.Redis; rc != nil {
		if rc.Addr == "" {
			p.add("redis.addr: required")
		}
		if rc.PasswordEnv != "" {
			rc.password = c.secret(&p, "redis.password_env", rc.PasswordEnv)
		}
		if rc.FailMode != "" && rc.FailMode != "open" && rc.FailMode != "closed" {
			p.add("redis.fail_mode: %q is not open or closed", rc.FailMode)
		}
		if rc.DB < 0 || rc.Timeout < 0 {
			p.add("redis: db and timeout must not be negative")
		}
		if rc.Timeout.D() > time.Minute {
			p.add("redis.timeout: %v is over a minute", rc.Timeout.D())
		}
	}
	c.validateEngine(&p)
	c.checkClient(&p)
	return p.err()
}

func (l *LimitsConfig) check(p *problems, what string) {
	if l == nil {
		return
	}
	if l.RPM < 0 || l.TPM < 0 || l.ITPM < 0 || l.OTPM < 0 || l.RPD < 0 || l.TPD < 0 || l.MaxConcurrent < 0 || l.RequestBurst < 0 || l.TokenBurst < 0 {
		p.add("%s: must not be negative", what)
	}
	if _, ok := meterings[l.Metering]; !ok {
		p.add("%s: metering %q is not admission or usage", what, l.Metering)
	}
}
