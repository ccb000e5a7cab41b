package gemini

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/ratelimit"
)

// The shapes of the embedding operations, which the transport treats like OpenAI's
// embeddings: no output tokens are reserved for them.
const (
	// ShapeEmbedContent is POST …/models/{model}:embedContent.
	ShapeEmbedContent dialect.Shape = "gemini.embed_content"
	// ShapeBatchEmbedContents is POST …/models/{model}:batchEmbedContents.
	ShapeBatchEmbedContents dialect.Shape = "gemini.batch_embed_contents"
)

// Provider implements llmclient.Dialect, so that Client.Transport can protect requests made
// by Google's Gen AI SDK (or any client of generateContent) to this provider's base URL.
var _ llmclient.Dialect = (*Provider)(nil)

// BaseURL returns the WithBaseURL value (default DefaultBaseURL, or the Vertex AI
// endpoint), without the version path.
func (p *Provider) BaseURL() string {
	base := strings.TrimSuffix(p.prefix, "/models/")
	if p.vertex {
		if i := strings.LastIndex(base, "/projects/"); i >= 0 {
			base = base[:i]
		}
	}
	if i := strings.LastIndexByte(base, '/'); i > len("https://") {
		base = base[:i] // the version segment
	}
	return base
}

// Inspect recognizes POST …/models/{model}:generateContent and :streamGenerateContent,
// under any API version (and Vertex AI's project path), takes the model from the path and
// reads maxOutputTokens and the text to estimate (system instruction, contents, function
// declarations, response schema) from the body. It also recognizes :embedContent and
// :batchEmbedContents (ShapeEmbedContent, ShapeBatchEmbedContents: no output), reading the
// texts to embed.
func (p *Provider) Inspect(method, path string, body []byte) (llmclient.APICall, bool) {
	if method != http.MethodPost {
		return llmclient.APICall{}, false
	}
	i := strings.LastIndex(path, "/models/")
	if i < 0 {
		return llmclient.APICall{}, false
	}
	model, op, ok := strings.Cut(path[i+len("/models/"):], ":")
	if !ok || model == "" || strings.Contains(model, "/") {
		return llmclient.APICall{}, false
	}
	var call llmclient.APICall
	switch op {
	case "generateContent":
		call.Shape = ShapeGenerateContent
	case "streamGenerateContent":
		call.Shape, call.Stream = ShapeStreamGenerateContent, true
	case "embedContent", "batchEmbedContents":
		call.Shape, call.NoOutput = ShapeEmbedContent, true
		if op == "batchEmbedContents" {
			call.Shape = ShapeBatchEmbedContents
		}
		call.Request.Model = model
		inspectEmbed(body, &call.Request)
		return call, true
	default:
		return llmclient.APICall{}, false
	}
	call.Request.Model = model
	inspectBody(body, &call.Request)
	return call, true
}

// inspectEmbed reads the texts of an EmbedContentRequest or BatchEmbedContentsRequest
// into req, one user message each. A body that does not decode leaves req as it is.
func inspectEmbed(body []byte, req *llmclient.Request) {
	var one struct {
		Content  *estContent `json:"content"`
		Requests []struct {
			Content *estContent `json:"content"`
		} `json:"requests"`
	}
	if len(body) == 0 || json.Unmarshal(body, &one) != nil {
		return
	}
	if one.Content != nil {
		req.Messages = appendContent(req.Messages, llmclient.RoleUser, one.Content.Parts)
	}
	for _, r := range one.Requests {
		if r.Content != nil {
			req.Messages = appendContent(req.Messages, llmclient.RoleUser, r.Content.Parts)
		}
	}
}

// inspectBody reads a GenerateContentRequest into req for estimation. A body that does not
// decode, maxOutputTokens included, leaves req as it is.
func inspectBody(body []byte, req *llmclient.Request) {
	var w wireBody
	if len(body) == 0 || json.Unmarshal(body, &w) != nil {
		return
	}
	g := w.GenerationConfig
	if g != nil && g.MaxOutputTokens.Bad {
		return
	}
	w.addTo(req)
	if g != nil {
		req.MaxTokens = g.MaxOutputTokens.N
	}
}

// Authorize sets the x-goog-api-key header (with WithVertex, "Authorization: Bearer"),
// after removing both; an empty key means the WithAPIKey credential, or none at all.
func (p *Provider) Authorize(h http.Header, key string) string {
	h.Del("X-Goog-Api-Key")
	h.Del("Authorization")
	if key == "" {
		key = p.apiKey
	}
	switch {
	case key == "":
	case p.vertex:
		h.Set("Authorization", "Bearer "+key)
	default:
		h.Set("X-Goog-Api-Key", key)
	}
	return key
}

// ClassifyError is the package's ClassifyError.
func (p *Provider) ClassifyError(status int, h http.Header, body []byte) *llmclient.Error {
	return ClassifyError(status, h, body)
}

// RateLimits returns nil: the Gemini API sends no rate-limit headers.
func (p *Provider) RateLimits(http.Header) *ratelimit.Status { return nil }

// NewStream decodes a streamGenerateContent response (SSE, or a JSON array). It owns
// resp.Body.
func (p *Provider) NewStream(_ dialect.Shape, resp *http.Response) llmclient.ProviderStream {
	return newStream(resp, func() {}, "")
}

// ratelimit.Rule is how the Gemini API meters its token quotas: tokens per minute count input
// tokens only (ai.google.dev/gemini-api/docs/rate-limits: "Tokens per minute (input)").
// Its limits apply per project, not per API key: name a quota scope for the project's
// keys (Upstream.QuotaScopes).
func (p *Provider) QuotaRule() ratelimit.Rule {
	return ratelimit.Rule{InputOnly: true}
}
