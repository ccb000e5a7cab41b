package openai

import (
	"net/http"
	"strings"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/ratelimit"
)

// Provider implements llmclient.Dialect, so that Client.Transport can protect requests made
// by other OpenAI SDKs to this provider's base URL.
var _ llmclient.Dialect = (*Provider)(nil)

// BaseURL returns the base URL requests are sent to: the WithBaseURL value (default
// DefaultBaseURL), or the WithAzure resource endpoint.
func (p *Provider) BaseURL() string {
	if p.azure {
		return strings.TrimSuffix(p.azurePrefix, "/openai/deployments/")
	}
	return p.base
}

// Inspect recognizes POST requests to the chat completions, responses and embeddings
// endpoints, including Azure's /openai/deployments/{deployment}/… and /openai/v1/… paths,
// and reads the model, the stream flag, the output bound and the text to estimate from
// the body. On Azure deployment paths without a model in the body, the deployment name
// is the model. The returned Request's strings may share body's memory (a Chat Completions
// string without escapes is not copied): body must not change while the call is in use.
func (p *Provider) Inspect(method, path string, body []byte) (llmclient.APICall, bool) {
	var call llmclient.APICall
	if !p.InspectCall(method, path, body, &call, nil, nil) {
		return llmclient.APICall{}, false
	}
	return call, true
}

// InspectCall is Inspect writing into call, which must be zero: it reports what Inspect
// reports, and leaves call zero when that is false. The first messages of a Chat
// Completions body and their one-part contents are written into the arrays of msgs and
// parts, from index 0 up to their capacity (their contents are overwritten; more grow as
// usual), so that a caller that reuses them (the transport's pooled calls) makes no
// allocation for a short conversation. The call then shares their memory as well as
// body's: neither may change while it is in use.
func (p *Provider) InspectCall(method, path string, body []byte, call *llmclient.APICall, msgs []llmclient.Message, parts []llmclient.Part) bool {
	if method != http.MethodPost {
		return false
	}
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		call.Shape = ShapeChatCompletions
		inspectChat(body, call, msgs, parts)
	case strings.HasSuffix(path, "/responses"):
		call.Shape = ShapeResponses
		inspectResponses(body, call)
	case strings.HasSuffix(path, "/embeddings"):
		call.Shape = ShapeEmbeddings
		call.NoOutput = true
		inspectEmbeddings(body, call)
	default:
		return false
	}
	if call.Request.Model == "" {
		call.Request.Model = deploymentOf(path)
	}
	return true
}

// deploymentOf returns the deployment name of an Azure deployment path, or "".
func deploymentOf(path string) string {
	const seg = "/deployments/"
	i := strings.Index(path, seg)
	if i < 0 {
		return ""
	}
	rest := path[i+len(seg):]
	if j := strings.IndexByte(rest, '/'); j >= 0 {
		return rest[:j]
	}
	return ""
}

// Authorize sets "Authorization: Bearer <key>" (the "api-key" header with WithAzure),
// after removing both; an empty key means the WithAPIKey key, or no credential at all.
func (p *Provider) Authorize(h http.Header, key string) string {
	h.Del("Authorization")
	h.Del("Api-Key")
	if key == "" {
		key = p.apiKey
	}
	if key == "" {
		return ""
	}
	if p.azure {
		h.Set("Api-Key", key)
		return key
	}
	h.Set("Authorization", "Bearer "+key)
	return key
}

// ClassifyError is the package's ClassifyError.
func (p *Provider) ClassifyError(status int, h http.Header, body []byte) *llmclient.Error {
	return ClassifyError(status, h, body)
}

// RateLimits reads the x-ratelimit-* headers; see ParseRateLimits.
func (p *Provider) RateLimits(h http.Header) *ratelimit.Status {
	return ParseRateLimits(h, time.Time{})
}

// RateLimitHeader reports whether RateLimits reads the response header name, which must
// be in canonical form ("X-Ratelimit-Remaining-Tokens"): RateLimits returns nil for a
// header map in which no such name has a value. llmclient's Transport uses it to pass
// over a response without quota headers.
func (p *Provider) RateLimitHeader(name string) bool {
	return len(name) > len(rateLimitPrefix) && name[:len(rateLimitPrefix)] == rateLimitPrefix
}

// NewStream decodes a Chat Completions event stream, or a Responses API one for
// ShapeResponses. It owns resp.Body.
func (p *Provider) NewStream(shape dialect.Shape, resp *http.Response) llmclient.ProviderStream {
	if shape == ShapeResponses {
		return newResponsesStream(resp, false, "")
	}
	return newChunkStream(resp)
}
