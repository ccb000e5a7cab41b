package llmclient

import (
	"time"

	"github.com/llmclient/llmclient/keysource"
	"github.com/llmclient/llmclient/pricing"
)

// Upstream is one place a request can be sent: a provider adapter, optionally with a pool of
// API keys, a model mapping and per-key limits. Register upstreams with WithUpstream.
type Upstream struct {
	// Name identifies the upstream in traces, errors and events. Required and unique.
	Name string
	// Provider is the adapter that speaks the vendor's wire format. Required.
	Provider Provider
	// Keys is an optional pool of API keys. The Client picks the least-in-flight key that is
	// not cooling down or evicted. Empty: the adapter's own key is used.
	Keys []string
	// KeySources are keys that change over time (OAuth and Entra ID tokens, a secret
	// manager), pooled after Keys as if they were keys: each is refreshed before it
	// expires (see keysource.Source). Nil entries are an error.
	KeySources []keysource.Source
	// Models maps a request's model name to this upstream's model name. Nil passes every
	// model through unchanged; otherwise the upstream only serves the models it maps.
	Models map[string]string
	// Limits bounds each key's requests per minute, tokens per minute and concurrency.
	// The zero value sets no limits.
	Limits Limits
	// QuotaScopes names quota scopes declared with WithQuotaScope that every key of the
	// upstream draws from too, besides its own Limits: a quota of the project or
	// organization the keys belong to, shared with the other upstreams that name it, for
	// the models each scope covers. Nil: none.
	QuotaScopes []string
	// Timeout bounds each one-shot attempt on this upstream. Zero uses WithAttemptTimeout's value.
	Timeout time.Duration
	// Weight is the upstream's share of the calls under routing.Weighted, relative to the
	// other upstreams of the route; 0 counts as 1 and values above 1<<20 as 1<<20. It must
	// not be negative.
	Weight int
	// PriceProvider is the provider ID the price table prices this upstream's models
	// under ("openai", "anthropic", "deepseek", …; see pricing.Table.Lookup). Empty: the
	// provider whose API pattern matches the Provider's Dialect base URL, else none (a
	// model name such as "gpt-4o" or "claude-…" still finds its vendor).
	PriceProvider string
	// Prices are the upstream's own prices, by upstream model name (after Models), ahead
	// of the price table: a negotiated rate, or a self-hosted model at zero
	// (pricing.NewModel, Model.WithPrice). The key "" prices every model the map does not
	// name. Nil values are rejected by New. Setting it turns pricing on (see WithPricing).
	Prices map[string]*pricing.Model
}

// model returns the upstream's model name for the request model and whether it serves it.
func (u *Upstream) model(requested string) (string, bool) {
	if u.Models == nil {
		return requested, true
	}
	m, ok := u.Models[requested]
	return m, ok
}
