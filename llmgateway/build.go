package llmgateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/llmclient/llmclient/provider/gemini"
	"github.com/llmclient/llmclient/provider/openai"
	"github.com/llmclient/llmclient/ratelimit"
	"github.com/llmclient/llmclient/routing"
)

var routings = map[string]routing.Policy{
	"":                routing.Ordered,
	"ordered":         routing.Ordered,
	"weighted":        routing.Weighted,
	"least_in_flight": routing.LeastInFlight,
	"latency":         routing.Latency,
}

var meterings = map[string]ratelimit.Metering{
	"":          ratelimit.MeterAdmission,
	"admission": ratelimit.MeterAdmission,
	"usage":     ratelimit.MeterUsage,
}

func (l *LimitsConfig) limits() llmclient.Limits {
	if l == nil {
		return llmclient.Limits{}
	}
	return llmclient.Limits{
		RPM: l.RPM, TPM: l.TPM, ITPM: l.ITPM, OTPM: l.OTPM, RPD: l.RPD, TPD: l.TPD,
		MaxConcurrent: l.MaxConcurrent, RequestBurst: l.RequestBurst, TokenBurst: l.TokenBurst,
		Metering: meterings[l.Metering],
	}
}

func dollars(f float64) pricing.Money {
	return pricing.Money(f * float64(pricing.Dollar))
}

func (b BudgetConfig) build() (budget.Budget, error) {
	out := budget.Budget{Name: b.Name, Soft: b.Soft, Reroute: b.Reroute}
	if !(b.CapUSD > 0) || b.CapUSD > 9e6 {
		return out, fmt.Errorf("cap_usd must be positive and at most 9,000,000 (got %v)", b.CapUSD)
	}
	out.Cap = dollars(b.CapUSD)
	if b.UnpricedUSD < 0 || b.UnpricedUSD > 9e6 || b.UnpricedUSD != b.UnpricedUSD {
		return out, fmt.Errorf("unpriced_usd must be in [0, 9,000,000]")
	}
	if b.UnpricedUSD > 0 {
		out.Unpriced, out.UnpricedCost = budget.UnpricedCharge, dollars(b.UnpricedUSD)
	}
	loc := time.UTC
	if b.TimeZone != "" {
		l, err := time.LoadLocation(b.TimeZone)
		if err != nil {
			return out, fmt.Errorf("time_zone: %v", err)
		}
		loc = l
	}
	switch w := b.Window; {
	case w == "" || w == "daily":
		out.Window = budget.Daily(loc)
	case w == "hourly":
		out.Window = budget.Hourly(loc)
	case w == "monthly":
		out.Window = budget.Monthly(loc)
	case strings.HasPrefix(w, "rolling:"):
		d, err := time.ParseDuration(strings.TrimPrefix(w, "rolling:"))
		if err != nil {
			return out, fmt.Errorf("window: %v", err)
		}
		out.Window = budget.Rolling(d)
	default:
		return out, fmt.Errorf("window %q is not hourly, daily, monthly or rolling:DURATION", w)
	}
	kind, name, _ := strings.Cut(b.Scope, ":")
	switch kind {
	case "", "client":
		out.Scope = budget.Client()
	case "each_tenant":
		out.Scope = budget.EachPartition("")
	case "tenant":
		out.Scope = budget.Partition(name)
	case "upstream":
		out.Scope = budget.Upstream(name)
	case "model":
		out.Scope = budget.Model(name)
	default:
		return out, fmt.Errorf("scope %q is not client, each_tenant, tenant:NAME, upstream:NAME or model:NAME", b.Scope)
	}
	if (kind == "tenant" || kind == "upstream" || kind == "model") && name == "" {
		return out, fmt.Errorf("scope %q names nothing", b.Scope)
	}
	return out, out.Validate()
}

func (b *BreakerConfig) build() (breaker.Config, error) {
	if b == nil {
		return breaker.Config{}, nil
	}
	cfg := breaker.Config{
		Window: b.Window.D(), MinRequests: b.MinRequests, FailureRatio: b.FailureRatio,
		ConsecutiveFailures: b.ConsecutiveFailures, OpenTimeout: b.OpenTimeout.D(),
		MaxOpenTimeout: b.MaxOpenTimeout.D(), HalfOpenProbes: b.HalfOpenProbes,
	}
	return cfg, cfg.Validate()
}

// provider makes the vendor adapter of an upstream, sending through hc.
func (u *UpstreamConfig) provider(hc *http.Client) (llmclient.Provider, error) {
	switch u.Vendor {
	case "openai", "azure":
		opts := []openai.Option{openai.WithHTTPClient(hc)}
		if u.Vendor == "azure" {
			opts = append(opts, openai.WithAzure(u.AzureEndpoint, u.AzureAPIVersion))
		} else if u.BaseURL != "" {
			opts = append(opts, openai.WithBaseURL(u.BaseURL))
		}
		if u.MaxTokensField != "" {
			opts = append(opts, openai.WithMaxTokensField(u.MaxTokensField))
		}
		if u.StreamUsage != nil {
			opts = append(opts, openai.WithStreamUsage(*u.StreamUsage))
		}
		for _, k := range sortedKeys(u.Headers) {
			opts = append(opts, openai.WithHeader(k, u.Headers[k]))
		}
		return openai.New(opts...)
	case "anthropic":
		opts := []anthropic.Option{anthropic.WithHTTPClient(hc)}
		if u.BaseURL != "" {
			opts = append(opts, anthropic.WithBaseURL(u.BaseURL))
		}
		for _, k := range sortedKeys(u.Headers) {
			opts = append(opts, anthropic.WithHeader(k, u.Headers[k]))
		}
		return anthropic.New(opts...)
	case "gemini":
		opts := []gemini.Option{gemini.WithHTTPClient(hc)}
		if u.BaseURL != "" {
			opts = append(opts, gemini.WithBaseURL(u.BaseURL))
		}
		for _, k := range sortedKeys(u.Headers) {
			opts = append(opts, gemini.WithHeader(k, u.Headers[k]))
		}
		return gemini.New(opts...)
	}
	return nil, fmt.Errorf("unknown vendor %q", u.Vendor)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// clientOptions turns the configuration into the Client's options, its upstreams'
// providers wrapped by wrap (nil: as they are), and reads pricing.file when readPricing.
// The options that need a live object (stores, the observer, middleware) are added by
// the caller. What cannot be built is reported in the error and left out, but for an
// upstream whose adapter cannot be made, which keeps its place with a stand-in adapter, so
// that checkClient does not report the groups and budgets naming it as unknown.
func (c *Config) clientOptions(hc *http.Client, wrap func(string, llmclient.Provider) llmclient.Provider, readPricing bool) ([]llmclient.Option, error) {
	var opts []llmclient.Option
	var errs []error
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		p, err := u.provider(hc)
		if err != nil {
			errs = append(errs, fmt.Errorf("upstream %q: %w", u.Name, err))
			p = unbuilt{}
		} else if wrap != nil {
			p = wrap(u.Name, p)
		}
		opts = append(opts, llmclient.WithUpstream(llmclient.Upstream{
			Name: u.Name, Provider: p, Keys: slices.Clone(u.keys), Models: u.Models,
			Limits: u.Limits.limits(), Timeout: u.Timeout.D(), Weight: u.Weight,
			PriceProvider: u.priceProvider(), QuotaScopes: slices.Clone(u.QuotaScopes),
		}))
	}
	for _, g := range c.Groups {
		opts = append(opts, llmclient.WithModelGroup(g.Name, g.Upstreams...))
		if g.Routing != "" {
			opts = append(opts, llmclient.WithRouting(g.Name, routings[g.Routing]))
		}
		if len(g.Fallback) > 0 {
			opts = append(opts, llmclient.WithGroupFallback(g.Name, g.Fallback...))
		}
		if g.Hedge != "" {
			h := routing.Hedge{On: true}
			if g.Hedge != "auto" {
				h.Delay, _ = parseDuration(g.Hedge)
			}
			opts = append(opts, llmclient.WithHedging(g.Name, h))
		}
	}
	if c.TenantLimits != nil {
		opts = append(opts, llmclient.WithPartitionLimits("", c.TenantLimits.limits()))
	}
	for _, t := range c.Tenants {
		if t.Limits != nil {
			opts = append(opts, llmclient.WithPartitionOverride(t.Name, t.Limits.limits()))
		}
	}
	for _, b := range c.Budgets {
		bb, err := b.build()
		if err != nil {
			errs = append(errs, fmt.Errorf("budget %q: %w", b.Name, err))
			continue
		}
		opts = append(opts, llmclient.WithBudget(bb))
	}
	r := c.Retry
	if r.MaxAttempts > 0 {
		opts = append(opts, llmclient.WithMaxAttempts(r.MaxAttempts))
	}
	if r.MaxTotalAttempts > 0 {
		opts = append(opts, llmclient.WithMaxTotalAttempts(r.MaxTotalAttempts))
	}
	if r.BackoffInitial > 0 {
		opts = append(opts, llmclient.WithBackoff(r.BackoffInitial.D(), r.BackoffMax.D()))
	}
	if r.MaxRetryAfter > 0 {
		opts = append(opts, llmclient.WithMaxRetryAfter(r.MaxRetryAfter.D()))
	}
	if r.BudgetRatio != nil {
		opts = append(opts, llmclient.WithRetryBudget(*r.BudgetRatio, r.BudgetFloor, r.BudgetWindow.D()))
	}
	if r.KeyCooldown > 0 {
		opts = append(opts, llmclient.WithKeyCooldown(r.KeyCooldown.D()))
	}
	if r.KeyEviction > 0 {
		opts = append(opts, llmclient.WithKeyEviction(r.KeyEviction.D()))
	}
	t := c.Timeouts
	if t.Attempt > 0 {
		opts = append(opts, llmclient.WithAttemptTimeout(t.Attempt.D()))
	}
	if t.FirstToken > 0 {
		opts = append(opts, llmclient.WithFirstTokenTimeout(t.FirstToken.D()))
	}
	if t.Idle > 0 {
		opts = append(opts, llmclient.WithIdleTimeout(t.Idle.D()))
	}
	if t.Stream > 0 {
		opts = append(opts, llmclient.WithStreamTimeout(t.Stream.D()))
	}
	l := c.Limiter
	if l.Mode == "fail_fast" {
		opts = append(opts, llmclient.WithLimiterMode(ratelimit.FailFast))
	}
	if l.MaxWait > 0 {
		opts = append(opts, llmclient.WithMaxWait(l.MaxWait.D()))
	}
	if l.BurstFraction > 0 {
		opts = append(opts, llmclient.WithBurstFraction(l.BurstFraction))
	}
	if l.ReservedOutput > 0 {
		opts = append(opts, llmclient.WithReservedOutput(l.ReservedOutput))
	}
	if c.Breaker != nil {
		bc, err := c.Breaker.build()
		if err != nil {
			errs = append(errs, fmt.Errorf("breaker: %w", err))
		} else {
			opts = append(opts, llmclient.WithBreaker(bc))
		}
	}
	if len(c.Fallbacks.Context) > 0 {
		opts = append(opts, llmclient.WithContextFallback(c.Fallbacks.Context...))
	}
	if len(c.Fallbacks.Content) > 0 {
		opts = append(opts, llmclient.WithContentFallback(c.Fallbacks.Content...))
	}
	if c.Pricing.File != "" && readPricing {
		tbl, err := pricing.LoadFile(c.Pricing.File)
		if err != nil {
			errs = append(errs, fmt.Errorf("pricing.file: %w", err))
		} else {
			opts = append(opts, llmclient.WithPricing(tbl))
		}
	}
	opts = append(opts, c.engineOptions()...)
	return opts, errors.Join(errs...)
}

// priceProvider is the upstream's provider in the price table: the configured one, else
// the one the Client infers from the adapter's base URL.
func (u *UpstreamConfig) priceProvider() string { return u.PriceProvider }

// unbuilt stands in for the adapter of an upstream whose adapter could not be made (the
// reason is reported apart); it is never called.
type unbuilt struct{}

func (unbuilt) Complete(context.Context, *llmclient.Call) (*llmclient.Response, error) {
	return nil, errors.New("llmgateway: the upstream's adapter could not be made")
}

func (unbuilt) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, errors.New("llmgateway: the upstream's adapter could not be made")
}

// checkHTTPClient is the HTTP client of the adapters checkClient makes; nothing is sent.
var checkHTTPClient = &http.Client{}

// checkClient adds to p every problem llmclient.New finds in the Client c describes, so
// that Parse (and with it -check and every reload) refuses what a start would: a burst
// above its rate, a group none of whose upstreams serves its name, a quota scope named
// twice, more budgets than a Client takes, a backoff out of range, and whatever else the
// library checks. The library's validation is the one source of these rules: the
// Client's options are built as New builds them, with an in-memory limit store in place
// of redis's and without reading pricing.file, and the Client, which starts nothing and
// connects nowhere, is closed and dropped.
func (c *Config) checkClient(p *problems) {
	opts, _ := c.clientOptions(checkHTTPClient, nil, false) // what failed is reported by validate
	if c.Redis != nil {
		opts = append(opts, llmclient.WithLimitStore(limitstore.NewMemory()))
		if names, ok := c.sharedBreakers(); ok {
			opts = append(opts, llmclient.WithSharedBreakers(names...))
		}
	}
	client, err := llmclient.New(opts...)
	if err == nil {
		_ = client.Close()
		return
	}
	const lead = "llmclient: invalid options: "
	if m := err.Error(); strings.HasPrefix(m, lead) {
		if inner := errors.Unwrap(err); inner != nil && inner.Error() == strings.TrimPrefix(m, lead) {
			err = inner
		}
	}
	eachLeaf("llmclient: ", err, func(msg string) { p.add("%s", msg) })
}

// eachLeaf calls f with each of the problems err joins (errors.Join, nested, and within
// fmt.Errorf's wrapping), each with the text that wraps it, so that one line is one
// problem.
func eachLeaf(prefix string, err error, f func(string)) {
	msg := err.Error()
	switch x := err.(type) {
	case interface{ Unwrap() []error }:
		kids := x.Unwrap()
		texts := make([]string, 0, len(kids))
		for _, k := range kids {
			if k != nil {
				texts = append(texts, k.Error())
			}
		}
		if msg == strings.Join(texts, "\n") {
			for _, k := range kids {
				if k != nil {
					eachLeaf(prefix, k, f)
				}
			}
			return
		}
	case interface{ Unwrap() error }:
		if in := x.Unwrap(); in != nil && strings.Contains(in.Error(), "\n") && strings.HasSuffix(msg, in.Error()) {
			eachLeaf(prefix+strings.TrimSuffix(msg, in.Error()), in, f)
			return
		}
	}
	for line := range strings.SplitSeq(msg, "\n") {
		f(prefix + line)
	}
}
