// Package anthropic is the llmclient adapter for Anthropic's Messages API
// (POST /v1/messages), one-shot and streaming.
//
// It translates a llmclient.Request into a Messages request: system messages become the
// top-level system prompt, tool results become tool_result blocks of a user turn
// (consecutive ones merged, since the API wants alternating turns; Message.IsError is the
// block's is_error), assistant tool calls become tool_use blocks, images become base64 or
// url sources. Request.DisableParallelToolCalls is tool_choice.disable_parallel_tool_use.
// max_tokens, which the API requires, defaults to DefaultMaxTokens. A format.JSONSchema
// response format is sent as output_config.format (structured outputs); format.JSONObject
// has no Messages API equivalent and is not sent, with a note in llmclient.Call.Notes: ask
// for JSON in the prompt or give a schema. Request.Extra is merged into the top level of
// the body (see Provider.Complete).
//
// Responses map text blocks to Text, thinking blocks to Reasoning and tool_use blocks to
// ToolCalls (input as a JSON string). stop_reason "refusal" is finish.Refusal; Anthropic
// reports no separate refusal text, so Response.Refusal stays empty and what the model said
// is in Text. Usage.InputTokens includes cache reads and cache writes (Anthropic counts
// them apart from input_tokens); CachedInputTokens is the cache reads.
//
// Error responses and stream error events become *llmclient.Error values classified by
// ClassifyError; rate-limit headers are read by ParseRateLimits. EstimateBodyTokens
// estimates a raw request body's prompt tokens for the transport.
//
// Cross-vendor translation: a conversation begun on another vendor is sent so that the
// Messages API accepts it, and every change is recorded in llmclient.Call.Notes:
//
//   - tool-call ids that do not match ^[a-zA-Z0-9_-]+$ (Gemini's signed
//     "call_0__thought__…", OpenAI-compatible "functions.get_weather:0") are encoded as
//     "lcid_<base64url>", reversibly and the same way in every request; an id that repeats
//     an earlier turn's gets a "_<n>" suffix, since tool_use ids must be unique; tool
//     results follow their call's mapping, and response ids are decoded back;
//   - images in a system message move to a user turn at the same place;
//   - temperature and top_p are clamped to [0, 1] (NaN and infinities are refused as
//     bad requests); stop sequences have no limit.
//
// Prompt caching: llmclient.CacheControl on a Part, a Message (its last block) or a Tool is
// sent as cache_control {"type":"ephemeral"} with "ttl" when set. The API takes at most 4
// breakpoints: the earliest beyond that are dropped, with a note. A system prompt with a
// breakpoint is sent as an array of text blocks. Usage.CacheWriteTokens is
// cache_creation_input_tokens.
//
// Limitation: the common Message type has no place for thinking blocks, so an assistant
// turn is replayed without them. With extended thinking and tool use the API requires the
// thinking block before tool_use; such conversations need the official SDK.
package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/adapter"
	"github.com/llmclient/llmclient/internal/httpx"
)

// errNoKey is returned when neither the Call nor the Provider has an API key.
var errNoKey = errors.New("anthropic: no API key: give the upstream Keys or use WithAPIKey")

// Provider is the Anthropic Messages API adapter. It implements llmclient.Provider and is
// safe for concurrent use.
type Provider struct {
	url       string
	apiKey    string
	bearer    bool
	version   string
	sender    adapter.Sender
	header    http.Header
	maxTokens int
}

var _ llmclient.Provider = (*Provider)(nil)

// New returns a Provider. It fails on a malformed base URL, a nil HTTP client, a
// non-positive default max tokens, or a version, header or key that cannot be sent in a
// header. No API key is required here: a Client with a key pool
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
	case !httpx.ValidHeaderValue(c.version):
		return nil, errors.New("anthropic: WithVersion: not a valid header value")
	}
	for _, err := range []error{httpx.CheckBaseURL(c.baseURL), httpx.CheckHeader(c.header), httpx.CheckAPIKey(c.apiKey)} {
		if err != nil {
			return nil, fmt.Errorf("anthropic: %w", err)
		}
	}
	if c.client == nil {
		c.client = httpx.DefaultClient()
	}
	return &Provider{
		url:       httpx.JoinURL(strings.TrimSuffix(strings.TrimSuffix(c.baseURL, "/"), "/v1"), "/v1/messages"),
		apiKey:    c.apiKey,
		bearer:    c.bearer,
		version:   c.version,
		sender:    adapter.Sender{Pkg: "anthropic", Client: adapter.GuardRedirects(c.client), Classify: classifyAt},
		header:    c.header,
		maxTokens: c.maxTokens,
	}, nil
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
	data, err := p.sender.ReadBody(resp, resp.Header.Get("Request-Id"), call.Model)
	if err != nil {
		return nil, err
	}
	out, err := parseResponse(data)
	if err != nil {
		e := malformed(resp.StatusCode, resp.Header, data, err)
		e.Model = call.Model
		e.Redact(p.keyFor(call)) // the message quotes the start of the body
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
	st := newStream(resp, cancel, p.keyFor(call))
	st.drain = true
	return st, nil
}

// send encodes the call, posts it and turns a non-2xx answer into an *llmclient.Error.
// On success the caller owns the response body.
func (p *Provider) send(ctx context.Context, call *llmclient.Call, stream bool) (*http.Response, error) {
	key := p.keyFor(call)
	if e := adapter.CheckCall("anthropic", call, key, errNoKey); e != nil {
		return nil, e
	}
	notes := adapter.NewNotes("anthropic")
	body, err := buildBody(call.Request, call.Model, p.maxTokens, stream, notes)
	call.Notes = append(call.Notes, notes.List()...)
	if err != nil {
		e, ok := err.(*llmclient.Error)
		if !ok {
			e = adapter.BadRequest(err)
		}
		e.Model = call.Model
		return nil, e
	}
	req, err := httpx.NewPost(ctx, p.url, body, p.header, stream, call.Headers)
	if err != nil {
		return nil, adapter.BadRequest(fmt.Errorf("anthropic: building HTTP request: %w", err))
	}
	if req.Header.Get("Anthropic-Version") == "" {
		req.Header.Set("Anthropic-Version", p.version)
	}
	p.setCredential(req.Header, key)
	return p.sender.Send(req, call.Model, key)
}

// malformed reports a 2xx body that is not a usable response (adapter.Malformed), with the
// request-id header.
func malformed(status int, h http.Header, body []byte, why error) *llmclient.Error {
	return adapter.Malformed("anthropic", status, h.Get("Request-Id"), body, why)
}

// setCredential sets key as x-api-key, or as a bearer token with WithAuthToken.
func (p *Provider) setCredential(h http.Header, key string) {
	if p.bearer {
		h.Set("Authorization", "Bearer "+key)
		return
	}
	h.Set("X-Api-Key", key)
}

func (p *Provider) keyFor(call *llmclient.Call) string {
	if call != nil && call.APIKey != "" {
		return call.APIKey
	}
	return p.apiKey
}
