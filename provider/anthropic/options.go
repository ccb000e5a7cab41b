package anthropic

import (
	"net/http"
	"net/textproto"
)

// Option configures a Provider. Options are applied in order; the last one of a kind wins.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	baseURL   string
	apiKey    string
	bearer    bool // send credentials as Authorization: Bearer (WithAuthToken)
	version   string
	client    *http.Client
	clientSet bool
	header    http.Header
	maxTokens int
}

// DefaultBaseURL is the Anthropic API's base URL.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultVersion is the anthropic-version header the Provider sends.
const DefaultVersion = "2023-06-01"

// DefaultMaxTokens is the max_tokens sent when Request.MaxTokens is 0: the Messages API
// requires a value. 4096 fits every current Claude model's output limit.
const DefaultMaxTokens = 4096

// WithBaseURL sets the API base URL (default DefaultBaseURL). Use it for proxies and
// gateways that speak the Messages API, and for tests. Requests go to its path plus
// /v1/messages; a base ending in /v1 (the OpenAI SDKs' convention) is taken without it, so
// that "https://proxy.example/v1" sends to https://proxy.example/v1/messages.
func WithBaseURL(u string) Option { return optionFunc(func(c *config) { c.baseURL = u }) }

// WithAPIKey sets the key sent as x-api-key when the Call carries none (an upstream without
// a key pool). Default: none, in which case every Call must carry a key. It replaces a
// WithAuthToken given before it: credentials are sent as x-api-key again.
func WithAPIKey(key string) Option {
	return optionFunc(func(c *config) { c.apiKey, c.bearer = key, false })
}

// WithAuthToken sets a bearer token (an OAuth access token, or a gateway's token) used
// when the Call carries no key, and makes the Provider send every credential — this token
// and the pool keys Calls carry — as "Authorization: Bearer <token>" instead of x-api-key,
// as the official SDK does with ANTHROPIC_AUTH_TOKEN. It replaces a WithAPIKey given
// before it. Default: x-api-key.
func WithAuthToken(token string) Option {
	return optionFunc(func(c *config) { c.apiKey, c.bearer = token, true })
}

// WithVersion sets the anthropic-version header (default DefaultVersion).
func WithVersion(v string) Option { return optionFunc(func(c *config) { c.version = v }) }

// WithHTTPClient sets the HTTP client (default: a new httpx.DefaultClient, with no overall
// timeout; calls are bounded by their context). A nil client is rejected by New. The
// Provider uses a copy that shares its Transport and follows a redirect only to the same
// host, never from https to http, so that the credential header goes nowhere else; a
// redirect it does not follow is returned as an error with the 3xx status.
func WithHTTPClient(hc *http.Client) Option {
	return optionFunc(func(c *config) { c.client, c.clientSet = hc, true })
}

// WithHeader adds a header to every request, such as anthropic-beta. Repeat it for several
// headers; a later value for the same key replaces an earlier one. The adapter's own
// Content-Type, Accept and x-api-key headers win; an anthropic-version or User-Agent set
// here replaces the adapter's. New rejects invalid names and values.
func WithHeader(key, value string) Option {
	return optionFunc(func(c *config) {
		if c.header == nil {
			c.header = make(http.Header)
		}
		c.header.Set(textproto.CanonicalMIMEHeaderKey(key), value)
	})
}

// WithDefaultMaxTokens sets the max_tokens sent when Request.MaxTokens is 0 (default
// DefaultMaxTokens). It must be positive.
func WithDefaultMaxTokens(n int) Option { return optionFunc(func(c *config) { c.maxTokens = n }) }
