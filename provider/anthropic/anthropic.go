// Package anthropic is the llmclient adapter for Anthropic's Messages API
// (POST /v1/messages), one-shot and streaming.
//
// It translates a llmclient.Request into a Messages request: system messages become the
// top-level system prompt, tool results become tool_result blocks of a user turn
// (consecutive ones merged, since the API wants alternating turns), assistant tool calls
// become tool_use blocks, images become base64 or url sources. max_tokens, which the API
// requires, defaults to DefaultMaxTokens. A FormatJSONSchema response format is sent as
// output_config.format (structured outputs); FormatJSONObject has no Messages API
// equivalent and is ignored: ask for JSON in the prompt or give a schema. Request.Extra is
// merged into the top level of the body (see Provider.Complete).
//
// Responses map text blocks to Text, thinking blocks to Reasoning and tool_use blocks to
// ToolCalls (input as a JSON string). stop_reason "refusal" is FinishRefusal; Anthropic
// reports no separate refusal text, so Response.Refusal stays empty and what the model said
// is in Text. Usage.InputTokens includes cache reads and cache writes (Anthropic counts
// them apart from input_tokens); CachedInputTokens is the cache reads.
//
// Error responses and stream error events become *llmclient.Error values classified by
// ClassifyError; rate-limit headers are read by ParseRateLimits. EstimateBodyTokens
// estimates a raw request body's prompt tokens for the transport.
//
// Limitation: the common Message type has no place for thinking blocks, so an assistant
// turn is replayed without them. With extended thinking and tool use the API requires the
// thinking block before tool_use; such conversations need the official SDK.
package anthropic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/httpx"
)

// maxResponseBody bounds a one-shot response body: 32 MiB, far above any real response, so
// a broken or hostile server cannot exhaust memory.
const maxResponseBody = 32 << 20

// userAgent identifies the library to the vendor, unless WithHeader sets one.
const userAgent = "llmclient-go"

// errNoKey is returned when neither the Call nor the Provider has an API key.
var errNoKey = errors.New("anthropic: no API key: give the upstream Keys or use WithAPIKey")

// Provider is the Anthropic Messages API adapter. It implements llmclient.Provider and is
// safe for concurrent use.
type Provider struct {
	url       string
	apiKey    string
	version   string
	client    *http.Client
	header    http.Header
	maxTokens int
}

var _ llmclient.Provider = (*Provider)(nil)

// New returns a Provider. It fails on a malformed base URL, a nil HTTP client or a
// non-positive default max tokens. No API key is required here: a Client with a key pool
// passes one with every Call.
func New(opts ...Option) (*Provider, error) {
	c := config{baseURL: DefaultBaseURL, version: DefaultVersion, maxTokens: DefaultMaxTokens}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	switch {
	case c.clientSet && c.client == nil:
		return nil, errors.New("anthropic: WithHTTPClient(nil)")
	case c.maxTokens <= 0:
		return nil, fmt.Errorf("anthropic: default max tokens must be positive, got %d", c.maxTokens)
	case c.version == "":
		return nil, errors.New("anthropic: empty anthropic-version")
	}
	if err := checkBaseURL(c.baseURL); err != nil {
		return nil, err
	}
	for k, v := range c.header {
		if !validHeaderName(k) {
			return nil, fmt.Errorf("anthropic: WithHeader: invalid header name %q", k)
		}
		if !validHeaderValue(v[0]) {
			return nil, fmt.Errorf("anthropic: WithHeader: invalid value for header %q", k)
		}
	}
	if !validHeaderValue(c.apiKey) {
		return nil, errors.New("anthropic: WithAPIKey: key contains characters not allowed in a header")
	}
	if c.client == nil {
		c.client = httpx.DefaultClient()
	}
	return &Provider{
		url:       httpx.JoinURL(c.baseURL, "/v1/messages"),
		apiKey:    c.apiKey,
		version:   c.version,
		client:    c.client,
		header:    c.header,
		maxTokens: c.maxTokens,
	}, nil
}

// checkBaseURL accepts absolute http(s) URLs without query, fragment or user info. The URL
// is not echoed when it has those: they may hold a secret.
func checkBaseURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return errors.New("anthropic: base URL: want an absolute http or https URL")
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return errors.New("anthropic: base URL: must not contain a query, fragment or user info")
	}
	return nil
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

// Complete sends one Messages request and returns the parsed response, with the
// anthropic-ratelimit-* headers in Response.RateLimits. A vendor error response is returned
// as an *llmclient.Error (see ClassifyError); a 2xx body that is not a valid response as an
// *llmclient.Error of class server_error; a request the adapter cannot encode as an
// *llmclient.Error of class bad_request; transport failures wrapped, for the Client to
// classify.
//
// Request.Extra fields are merged into the top level of the body and replace the fields
// the adapter set; a JSON object value is merged into the adapter's object of that name
// one level deep, and a nil value removes the field.
func (p *Provider) Complete(ctx context.Context, call *llmclient.Call) (*llmclient.Response, error) {
	resp, err := p.send(ctx, call, false)
	if err != nil {
		return nil, err
	}
	defer httpx.DrainClose(resp.Body)
	now := time.Now()
	data, err := httpx.ReadLimited(resp.Body, maxResponseBody)
	if err != nil {
		if errors.Is(err, httpx.ErrTooLarge) {
			e := malformed(resp.StatusCode, resp.Header, nil, err)
			e.Model = call.Model
			return nil, e
		}
		return nil, &netError{op: "reading response", err: err}
	}
	out, err := parseResponse(data)
	if err != nil {
		e := malformed(resp.StatusCode, resp.Header, data, err)
		e.Model = call.Model
		return nil, e
	}
	out.RateLimits = parseRateLimits(resp.Header, now)
	return out, nil
}

// Stream sends one streaming Messages request and returns once the response headers
// arrive. A non-2xx status is returned as an *llmclient.Error, like Complete.
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
		return nil, badRequest(errors.New("anthropic: nil call or request"))
	}
	key := p.keyFor(call)
	switch {
	case key == "":
		return nil, &llmclient.Error{Class: llmclient.ClassAuth, Model: call.Model, Err: errNoKey}
	case !validHeaderValue(key):
		return nil, badRequest(errors.New("anthropic: API key contains characters not allowed in a header"))
	}
	body, err := buildBody(call.Request, call.Model, p.maxTokens, stream)
	if err != nil {
		e := badRequest(err)
		e.Model = call.Model
		return nil, e
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return nil, badRequest(fmt.Errorf("anthropic: building HTTP request: %w", err))
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
	if req.Header.Get("Anthropic-Version") == "" {
		req.Header.Set("Anthropic-Version", p.version)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", userAgent)
	}
	req.Header.Set("X-Api-Key", key)
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, &netError{op: "sending request", err: err}
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer httpx.DrainClose(resp.Body)
	data, rerr := httpx.ReadLimited(resp.Body, httpx.MaxErrorBody)
	e := classifyAt(resp.StatusCode, resp.Header, data, time.Now())
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

func (e *netError) Error() string { return "anthropic: " + e.op + ": " + e.err.Error() }
func (e *netError) Unwrap() error { return e.err }

// badRequest wraps a request the adapter cannot encode: the Client neither retries nor
// fails over.
func badRequest(err error) *llmclient.Error {
	return &llmclient.Error{Class: llmclient.ClassBadRequest, Message: err.Error(), Err: err}
}

// malformed reports a 2xx body that is not a usable response: a broken server or proxy,
// a transient fault, so it is a server error.
func malformed(status int, h http.Header, body []byte, why error) *llmclient.Error {
	msg := "anthropic: " + why.Error()
	if s := httpx.Snippet(body, 64); s != "" {
		msg += "; body: " + s
	}
	return &llmclient.Error{
		Class:     llmclient.ClassServerError,
		Status:    status,
		Message:   msg,
		RequestID: h.Get("Request-Id"),
		Err:       why,
	}
}

func (p *Provider) keyFor(call *llmclient.Call) string {
	if call != nil && call.APIKey != "" {
		return call.APIKey
	}
	return p.apiKey
}
