// Package gemini is the llmclient adapter for Google's Gemini API (generateContent and
// streamGenerateContent), and for Gemini on Vertex AI with WithVertex.
//
// It translates a llmclient.Request into a GenerateContentRequest: system messages become
// the systemInstruction, assistant turns role "model", tool calls functionCall parts and
// tool results functionResponse parts of a user turn (consecutive same-role messages are
// merged). Gemini matches a function response to its call by function name, so a tool
// result's name is looked up from the assistant call with the same ID earlier in the
// conversation (Message.Name is the fallback). A tool result that is a JSON object is sent
// as the response object; any other text as {"output": text}; the result of a failed call
// (Message.IsError) as {"error": the object or text}. Tool parameters are sent as
// parametersJsonSchema and a format.JSONSchema schema as responseJsonSchema, which take
// standard JSON Schema; format.JSONObject sets responseMimeType "application/json".
// MaxTokens 0 leaves maxOutputTokens to the model's default. Request.Extra is merged into
// the body (see Provider.Complete).
//
// Tool-call IDs: Gemini rarely sends function call ids, so the adapter makes them up as
// "call_<n>" (n counting the conversation's tool calls, so ids stay unique across turns), and appends the thought signature of Gemini 3 models as "__thought__<sig>",
// so that replaying the conversation sends the signature back as Gemini 3 requires (text
// parts' optional signatures are dropped). An assistant turn replayed without any
// signature, such as one written by another vendor, gets Google's documented
// "skip_thought_signature_validator" placeholder. Treat IDs as opaque.
//
// Responses: thought parts become Reasoning, functionCall parts ToolCalls; STOP with
// function calls is finish.ToolCalls, the safety family of finish reasons
// finish.ContentFilter, and a prompt blocked before generation an *llmclient.Error of class
// content_filtered. Usage.OutputTokens counts candidates plus thoughts (Gemini bills
// thinking as output) and ReasoningTokens the thoughts. A stream has no end marker: it is
// complete once a chunk carried a finishReason, and an end of body before that is an
// interruption (io.ErrUnexpectedEOF); its usage is the last usageMetadata, reported with
// the finish reason. An error inside the stream — a data line with an error object, or the
// bare JSON {"error":…} (or [{"error":…}]) Gemini sends without "data:", on one line or
// several — is returned as a classified *llmclient.Error, not as an interruption.
//
// Cross-vendor translation: a conversation begun on another vendor is sent so that the API
// accepts it, and every change is recorded in llmclient.Call.Notes: images of a system
// message move to a user turn at the same place (the system instruction takes text only);
// images of tool results are sent after the function responses of their turn; a tool
// result that answers no call of the model turn right before it is sent as a text part;
// temperature is clamped to [0, 2] and topP to [0, 1]; of more than 5 stop sequences the
// first 5 are sent. NaN and infinities are refused as bad requests. Other vendors' tool
// call ids are sent as function call ids. Gemini has no setting for parallel function
// calls, so Request.DisableParallelToolCalls is not sent (with a note).
// llmclient.CacheControl marks are ignored (Gemini caches implicitly; explicit caches are
// named with Extra "cachedContent").
//
// Embeddings: Provider is an llmclient.Embedder: one input with :embedContent, several
// with :batchEmbedContents (at most MaxEmbedBatch, default 100); see Embed.
//
// The API key travels in the x-goog-api-key header, never in the URL, so it cannot leak
// into logged URLs or errors.
//
// Error responses (google.rpc.Status) become *llmclient.Error values classified by
// ClassifyError. EstimateBodyTokens estimates a raw request body's prompt tokens for the
// transport.
package gemini

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/adapter"
	"github.com/llmclient/llmclient/internal/httpx"
)

var errNoKey = errors.New("gemini: no API key or access token: give the upstream Keys or use WithAPIKey")

// Provider is the Gemini adapter. It implements llmclient.Provider and is safe for
// concurrent use.
type Provider struct {
	prefix string // URL up to "/models/"
	apiKey string
	vertex bool
	sender adapter.Sender
	header http.Header

	maxEmbedBatch int
}

var _ llmclient.Provider = (*Provider)(nil)

// New returns a Provider. It fails on a malformed base URL, a nil HTTP client,
// WithVertex without a project or location, a WithAPIVersion that is not one path segment,
// or a header or key that cannot be sent in a header. No API key is required here: a Client with a
// key pool passes one with every Call.
func New(opts ...Option) (*Provider, error) {
	var c config
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if c.clientSet && c.client == nil {
		return nil, errors.New("gemini: WithHTTPClient(nil)")
	}
	if !c.maxEmbedBatchSet {
		c.maxEmbedBatch = DefaultMaxEmbedBatch
	} else if c.maxEmbedBatch < 1 || c.maxEmbedBatch > maxEmbedBatchLimit {
		return nil, fmt.Errorf("gemini: WithMaxEmbedBatch: want 1 to %d, got %d", maxEmbedBatchLimit, c.maxEmbedBatch)
	}
	if c.vertex && (c.project == "" || c.location == "" || strings.ContainsAny(c.project+c.location, "/?#")) {
		return nil, fmt.Errorf("gemini: WithVertex(%q, %q): project and location must be plain names", c.project, c.location)
	}
	base := c.baseURL
	if base == "" {
		base = DefaultBaseURL
		if c.vertex {
			base = "https://" + c.location + "-aiplatform.googleapis.com"
			if c.location == "global" {
				base = "https://aiplatform.googleapis.com"
			}
		}
	}
	for _, err := range []error{httpx.CheckBaseURL(base), httpx.CheckHeader(c.header), httpx.CheckAPIKey(c.apiKey)} {
		if err != nil {
			return nil, fmt.Errorf("gemini: %w", err)
		}
	}
	version := c.apiVersion
	if strings.ContainsAny(version, "/?#%") {
		return nil, fmt.Errorf("gemini: WithAPIVersion(%q): want one path segment such as \"v1beta\"", version)
	}
	if version == "" {
		version = "v1beta"
		if c.vertex {
			version = "v1"
		}
	}
	prefix := httpx.JoinURL(base, version)
	if c.vertex {
		prefix += "/projects/" + c.project + "/locations/" + c.location + "/publishers/google"
	}
	if c.client == nil {
		c.client = httpx.DefaultClient()
	}
	return &Provider{
		prefix: prefix + "/models/",
		apiKey: c.apiKey,
		vertex: c.vertex,
		sender: adapter.Sender{Pkg: "gemini", Client: adapter.GuardRedirects(c.client), Classify: classifyAt},
		header: c.header,

		maxEmbedBatch: c.maxEmbedBatch,
	}, nil
}

// Complete sends one generateContent request and returns the parsed response. A vendor
// error response is returned as an *llmclient.Error (see ClassifyError); a blocked prompt
// as an *llmclient.Error of class content_filtered; a 2xx body that is not a valid response
// as an *llmclient.Error of class server_error; a request the adapter cannot encode as an
// *llmclient.Error of class bad_request; transport failures wrapped, for the Client to
// classify.
//
// Request.Extra fields (such as safetySettings or cachedContent) are merged into the top
// level of the body and replace the fields the adapter set; a JSON object value is merged
// into the adapter's object of that name one level deep (so "generationConfig" can add a
// thinkingConfig), and a nil value removes the field.
func (p *Provider) Complete(ctx context.Context, call *llmclient.Call) (*llmclient.Response, error) {
	resp, err := p.send(ctx, call, false)
	if err != nil {
		return nil, err
	}
	defer httpx.DrainClose(resp.Body)
	data, err := p.sender.ReadBody(resp, "", call.Model)
	if err != nil {
		return nil, err
	}
	out, err := parseResponse(resp.StatusCode, data, priorCalls(call.Request))
	if err != nil {
		var e *llmclient.Error
		if errors.As(err, &e) {
			e.Model = call.Model
			e.Redact(p.keyFor(call))
		}
		return nil, err
	}
	return out, nil
}

// Stream sends one streamGenerateContent?alt=sse request and returns once the response
// headers arrive. A non-2xx status is returned as an *llmclient.Error, like Complete.
func (p *Provider) Stream(ctx context.Context, call *llmclient.Call) (llmclient.ProviderStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	resp, err := p.send(ctx, call, true)
	if err != nil {
		cancel()
		return nil, err
	}
	st := newStream(resp, cancel, p.keyFor(call))
	st.idBase = priorCalls(call.Request)
	return st, nil
}

// send encodes the call, posts it and turns a non-2xx answer into an *llmclient.Error.
// On success the caller owns the response body.
func (p *Provider) send(ctx context.Context, call *llmclient.Call, stream bool) (*http.Response, error) {
	key := p.keyFor(call)
	if e := adapter.CheckCall("gemini", call, key, errNoKey); e != nil {
		return nil, e
	}
	u, err := p.endpoint(call, stream)
	if err == nil {
		var body []byte
		notes := adapter.NewNotes("gemini")
		body, err = buildBody(call.Request, notes)
		call.Notes = append(call.Notes, notes.List()...)
		if err == nil {
			return p.post(ctx, call, u, key, body, stream)
		}
	}
	e := adapter.BadRequest(err)
	e.Model = call.Model
	return nil, e
}

func (p *Provider) post(ctx context.Context, call *llmclient.Call, u, key string, body []byte, stream bool) (*http.Response, error) {
	req, err := httpx.NewPost(ctx, u, body, p.header, stream, call.Headers)
	if err != nil {
		return nil, adapter.BadRequest(fmt.Errorf("gemini: building HTTP request: %w", err))
	}
	if p.vertex {
		req.Header.Set("Authorization", "Bearer "+key)
	} else {
		req.Header.Set("X-Goog-Api-Key", key)
	}
	return p.sender.Send(req, call.Model, key)
}

// malformed reports a 2xx body that is not a usable response (adapter.Malformed).
func malformed(status int, body []byte, why error) *llmclient.Error {
	return adapter.Malformed("gemini", status, "", body, why)
}

// endpoint is the method URL for the call's model. A "models/" prefix on the model name
// is accepted and dropped.
func (p *Provider) endpoint(call *llmclient.Call, stream bool) (string, error) {
	model := call.Model
	if model == "" {
		model = call.Request.Model
	}
	model = strings.TrimPrefix(model, "models/")
	if model == "" {
		return "", errors.New("gemini: no model")
	}
	if stream {
		return p.prefix + url.PathEscape(model) + ":streamGenerateContent?alt=sse", nil
	}
	return p.prefix + url.PathEscape(model) + ":generateContent", nil
}

func (p *Provider) keyFor(call *llmclient.Call) string {
	if call != nil && call.APIKey != "" {
		return call.APIKey
	}
	return p.apiKey
}
