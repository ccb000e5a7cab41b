// Package gemini is the llmclient adapter for Google's Gemini API (generateContent and
// streamGenerateContent), and for Gemini on Vertex AI with WithVertex.
//
// It translates a llmclient.Request into a GenerateContentRequest: system messages become
// the systemInstruction, assistant turns role "model", tool calls functionCall parts and
// tool results functionResponse parts of a user turn (consecutive same-role messages are
// merged). Gemini matches a function response to its call by function name, so a tool
// result's name is looked up from the assistant call with the same ID earlier in the
// conversation (Message.Name is the fallback). A tool result that is a JSON object is sent
// as the response object; any other text as {"output": text}. Tool parameters are sent as
// parametersJsonSchema and a FormatJSONSchema schema as responseJsonSchema, which take
// standard JSON Schema; FormatJSONObject sets responseMimeType "application/json".
// MaxTokens 0 leaves maxOutputTokens to the model's default. Request.Extra is merged into
// the body (see Provider.Complete).
//
// Tool-call IDs: Gemini rarely sends function call ids, so the adapter makes them up as
// "call_<n>", and appends the thought signature of Gemini 3 models as "__thought__<sig>",
// so that replaying the conversation sends the signature back as Gemini 3 requires (text
// parts' optional signatures are dropped). An assistant turn replayed without any
// signature, such as one written by another vendor, gets Google's documented
// "skip_thought_signature_validator" placeholder. Treat IDs as opaque.
//
// Responses: thought parts become Reasoning, functionCall parts ToolCalls; STOP with
// function calls is FinishToolCalls, the safety family of finish reasons
// FinishContentFilter, and a prompt blocked before generation an *llmclient.Error of class
// content_filtered. Usage.OutputTokens counts candidates plus thoughts (Gemini bills
// thinking as output) and ReasoningTokens the thoughts. A stream has no end marker: it is
// complete once a chunk carried a finishReason, and an end of body before that is an
// interruption (io.ErrUnexpectedEOF); its usage is the last usageMetadata, reported with
// the finish reason.
//
// The API key travels in the x-goog-api-key header, never in the URL, so it cannot leak
// into logged URLs or errors.
//
// Error responses (google.rpc.Status) become *llmclient.Error values classified by
// ClassifyError. EstimateBodyTokens estimates a raw request body's prompt tokens for the
// transport.
package gemini

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/httpx"
)

// maxResponseBody bounds a one-shot response body: 32 MiB, far above any real response, so
// a broken or hostile server cannot exhaust memory.
const maxResponseBody = 32 << 20

// userAgent identifies the library to the vendor, unless WithHeader sets one.
const userAgent = "llmclient-go"

var errNoKey = errors.New("gemini: no API key or access token: give the upstream Keys or use WithAPIKey")

// Provider is the Gemini adapter. It implements llmclient.Provider and is safe for
// concurrent use.
type Provider struct {
	prefix string // URL up to "/models/"
	apiKey string
	vertex bool
	client *http.Client
	header http.Header
}

var _ llmclient.Provider = (*Provider)(nil)

// New returns a Provider. It fails on a malformed base URL, a nil HTTP client, or
// WithVertex without a project or location. No API key is required here: a Client with a
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
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("gemini: base URL: want an absolute http or https URL")
	} else if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		// The URL is not echoed: a query or user info may hold a secret.
		return nil, errors.New("gemini: base URL: must not contain a query, fragment or user info")
	}
	for k, v := range c.header {
		if !validHeaderName(k) {
			return nil, fmt.Errorf("gemini: WithHeader: invalid header name %q", k)
		}
		if !validHeaderValue(v[0]) {
			return nil, fmt.Errorf("gemini: WithHeader: invalid value for header %q", k)
		}
	}
	if !validHeaderValue(c.apiKey) {
		return nil, errors.New("gemini: WithAPIKey: key contains characters not allowed in a header")
	}
	version := c.apiVersion
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
		client: c.client,
		header: c.header,
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
	data, err := httpx.ReadLimited(resp.Body, maxResponseBody)
	if err != nil {
		if errors.Is(err, httpx.ErrTooLarge) {
			e := malformed(resp.StatusCode, nil, err)
			e.Model = call.Model
			return nil, e
		}
		return nil, &netError{op: "reading response", err: err}
	}
	out, err := parseResponse(resp.StatusCode, data)
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
	return newStream(resp, cancel, p.keyFor(call)), nil
}

// send encodes the call, posts it and turns a non-2xx answer into an *llmclient.Error.
// On success the caller owns the response body.
func (p *Provider) send(ctx context.Context, call *llmclient.Call, stream bool) (*http.Response, error) {
	if call == nil || call.Request == nil {
		return nil, badRequest(errors.New("gemini: nil call or request"))
	}
	key := p.keyFor(call)
	switch {
	case key == "":
		return nil, &llmclient.Error{Class: llmclient.ClassAuth, Model: call.Model, Err: errNoKey}
	case !validHeaderValue(key):
		return nil, badRequest(errors.New("gemini: API key contains characters not allowed in a header"))
	}
	u, err := p.endpoint(call, stream)
	if err == nil {
		var body []byte
		if body, err = buildBody(call.Request); err == nil {
			return p.post(ctx, call, u, key, body, stream)
		}
	}
	e := badRequest(err)
	e.Model = call.Model
	return nil, e
}

func (p *Provider) post(ctx context.Context, call *llmclient.Call, u, key string, body []byte, stream bool) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, badRequest(fmt.Errorf("gemini: building HTTP request: %w", err))
	}
	for k, v := range p.header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", userAgent)
	}
	if p.vertex {
		req.Header.Set("Authorization", "Bearer "+key)
	} else {
		req.Header.Set("X-Goog-Api-Key", key)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, &netError{op: "sending request", err: err}
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer httpx.DrainClose(resp.Body)
	data, rerr := httpx.ReadLimited(resp.Body, httpx.MaxErrorBody)
	e := ClassifyError(resp.StatusCode, resp.Header, data)
	e.Model = call.Model
	if rerr != nil && !errors.Is(rerr, httpx.ErrTooLarge) {
		e.Err = rerr // the status says what happened; keep the read error as the cause
	}
	e.Redact(key)
	return nil, e
}

// netError wraps a transport failure with the package prefix, keeping the chain for
// llmclient.ClassOf.
type netError struct {
	op  string
	err error
}

func (e *netError) Error() string { return "gemini: " + e.op + ": " + e.err.Error() }
func (e *netError) Unwrap() error { return e.err }

// badRequest wraps a request the adapter cannot encode: the Client neither retries nor
// fails over.
func badRequest(err error) *llmclient.Error {
	return &llmclient.Error{Class: llmclient.ClassBadRequest, Message: err.Error(), Err: err}
}

// malformed reports a 2xx body that is not a usable response: a broken server or proxy,
// a transient fault, so it is a server error.
func malformed(status int, body []byte, why error) *llmclient.Error {
	msg := "gemini: " + why.Error()
	if s := httpx.Snippet(body, 64); s != "" {
		msg += "; body: " + s
	}
	return &llmclient.Error{Class: llmclient.ClassServerError, Status: status, Message: msg, Err: why}
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

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
