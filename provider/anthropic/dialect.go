package anthropic

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/ratelimit"
)

// Provider implements llmclient.Dialect, so that Client.Transport can protect requests made
// by anthropic-sdk-go (or any client of the Messages API) to this provider's base URL.
var _ llmclient.Dialect = (*Provider)(nil)

// BaseURL returns the WithBaseURL value (default DefaultBaseURL), without the /v1 path.
func (p *Provider) BaseURL() string { return strings.TrimSuffix(p.url, "/v1/messages") }

// Inspect recognizes POST /v1/messages and reads the model, the stream flag, max_tokens and
// the text to estimate (system prompt, messages, tools, output schema) from the body.
func (p *Provider) Inspect(method, path string, body []byte) (llmclient.APICall, bool) {
	if method != http.MethodPost || path != "/v1/messages" {
		return llmclient.APICall{}, false
	}
	call := llmclient.APICall{Shape: ShapeMessages}
	var w wireBody
	if len(body) == 0 || json.Unmarshal(body, &w) != nil || w.Stream.Bad || w.MaxTokens.Bad {
		// Read what can be read: routing needs the model even when a field is odd.
		var head struct {
			Model     string `json:"model"`
			Stream    bool   `json:"stream"`
			MaxTokens int    `json:"max_tokens"`
		}
		_ = json.Unmarshal(body, &head)
		w.Model, w.Stream.V, w.MaxTokens.N = head.Model, head.Stream, head.MaxTokens
	}
	req := &call.Request
	req.Model, req.MaxTokens, call.Stream = w.Model, w.MaxTokens.N, w.Stream.V
	w.addTo(req)
	return call, true
}

// Authorize sets the x-api-key header (with WithAuthToken, "Authorization: Bearer"),
// after removing both; an empty key means the WithAPIKey or WithAuthToken credential, or
// no credential at all. It returns the credential it set.
func (p *Provider) Authorize(h http.Header, key string) string {
	h.Del("X-Api-Key")
	h.Del("Authorization")
	if key == "" {
		key = p.apiKey
	}
	if key != "" {
		p.setCredential(h, key)
	}
	return key
}

// ClassifyError is the package's ClassifyError.
func (p *Provider) ClassifyError(status int, h http.Header, body []byte) *llmclient.Error {
	return ClassifyError(status, h, body)
}

// RateLimits reads the anthropic-ratelimit-* headers; see ParseRateLimits.
func (p *Provider) RateLimits(h http.Header) *ratelimit.Status {
	return parseRateLimits(h, time.Time{})
}

// NewStream decodes a Messages event stream. It owns resp.Body.
func (p *Provider) NewStream(_ dialect.Shape, resp *http.Response) llmclient.ProviderStream {
	return newStream(resp, func() {}, "")
}

// ratelimit.Rule is how Anthropic meters its token quotas: output tokens per minute count the
// output generated (max_tokens does not factor in), and prompt-cache reads do not count
// toward input tokens per minute (docs.anthropic.com, rate limits; true for most models).
func (p *Provider) QuotaRule() ratelimit.Rule {
	return ratelimit.Rule{OutputOnUsage: true, CacheReadsFree: true}
}
