// Package openai is the llmclient adapter for the OpenAI Chat Completions API and every
// vendor that speaks it: OpenAI itself, Azure OpenAI (WithAzure), and OpenAI-compatible
// servers reached by base URL — DeepSeek, Qwen (DashScope compatible mode), Groq,
// OpenRouter, vLLM, Ollama and others.
//
// The adapter translates requests, responses and errors only: retry, limiting and
// failover belong to the llmclient.Client that drives it.
//
// Cross-vendor translation: a conversation begun on another vendor is sent so that Chat
// Completions accepts it, and every change is recorded in llmclient.Call.Notes:
//
//   - tool call ids longer than 40 characters (Gemini's signed "call_0__thought__…"), which
//     OpenAI rejects, are shortened to "lch_<sha-256 prefix>", the same way in the call
//     and its result and in every request of a conversation;
//   - images of a system message move to a user message right after it, and images of
//     tool results to one user message after the run of tool results (system and tool
//     messages take text only); a tool result that was only an image says so in its text;
//   - an image in an assistant message cannot be placed: the call is refused before
//     sending, with an error wrapping llmclient.ErrUnsupported, so the Client can fail over;
//   - a tool result's error mark (llmclient.Message.IsError) has no place in a tool
//     message or a function_call_output item: the result is sent as written;
//   - temperature is clamped to [0, 2] and top_p to [0, 1]; of more than 4 stop
//     sequences the first 4 are sent; NaN and infinities are refused as bad requests;
//   - llmclient.CacheControl marks are ignored: OpenAI caches prompt prefixes on its own
//     and reports the cached part in Usage.CachedInputTokens and the part written to the
//     cache (prompt_tokens_details.cache_write_tokens, or the Responses API's
//     input_tokens_details.cache_write_tokens) in Usage.CacheWriteTokens, both parts of
//     Usage.InputTokens.
//
// Request.DisableParallelToolCalls is parallel_tool_calls false (Chat Completions and
// Responses), sent only with tools: OpenAI refuses the field without them.
//
// Responses API: with WithResponsesAPI, Complete and Stream use POST /responses. Leading
// system messages become instructions (later ones system input messages); user messages
// input_text and input_image parts (detail "auto" unless set); assistant text an
// assistant message and its tool calls function_call items; tool results
// function_call_output items, which take images; tools function tools; MaxTokens is
// max_output_tokens, a response format text.format, and Extra "reasoning_effort" becomes
// reasoning.effort. Call ids longer than 64 characters are shortened as above; system
// images move to a user message; an assistant image, and stop sequences (the Responses API
// has none), are refused with ErrUnsupported. Responses report reasoning summaries (and
// reasoning_text content) as Reasoning, function_call items as ToolCalls, a refusal as
// Refusal and FinishRefusal, status completed as FinishStop (FinishToolCalls with calls),
// incomplete as FinishLength (max_output_tokens) or FinishContentFilter, and a failed
// response or an error event as a classified *llmclient.Error. Reasoning items are not
// replayed: the common Message has no place for them (set Extra "store" and
// "previous_response_id" to continue server-side).
//
// Embeddings: Provider is an llmclient.Embedder (POST /embeddings; on Azure the model's
// deployment), for OpenAI and every compatible server; see Embed and WithMaxEmbedBatch.
package openai

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/llmclient/llmclient/internal/adapter"
	"github.com/llmclient/llmclient/internal/httpx"
)

// DefaultBaseURL is the OpenAI API base URL used when WithBaseURL is not given.
const DefaultBaseURL = "https://api.openai.com/v1"

// The names of the output-bound field, for WithMaxTokensField.
const (
	// FieldMaxCompletionTokens is OpenAI's current name, required by its reasoning models
	// and newer GPT models (which reject max_tokens), on OpenAI and Azure OpenAI alike.
	FieldMaxCompletionTokens = "max_completion_tokens"
	// FieldMaxTokens is the older name that OpenAI-compatible vendors understand
	// (DeepSeek, Qwen/DashScope, Ollama, Mistral, Together; vLLM, Groq and OpenRouter
	// accept both).
	FieldMaxTokens = "max_tokens"
)

// Provider speaks the Chat Completions dialect. Create it with New. It holds no per-call
// state and is safe for concurrent use.
type Provider struct {
	sender adapter.Sender
	apiKey string
	// base is the API base URL without a trailing slash (non-Azure).
	base string
	// azure: an operation's URL is azurePrefix + PathEscape(model) + "/" + op + azureQuery.
	azure       bool
	azurePrefix string
	azureQuery  string
	// responses: Complete and Stream use POST /responses (WithResponsesAPI).
	responses     bool
	maxEmbedBatch int
	header        http.Header // static headers: organization, project, WithHeader
	maxField      string
	streamUsage   bool
}

// Option configures a Provider. Options apply in order and the last one of a kind wins.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	baseURL       string
	apiKey        string
	client        *http.Client
	clientSet     bool
	organization  string
	project       string
	headers       [][2]string
	azure         bool
	azureURL      string
	azureVersion  string
	maxField      string
	streamUsage   bool
	responses     bool
	maxEmbedBatch int
}

// WithBaseURL sets the API base URL, to which "/chat/completions" is appended. Default
// DefaultBaseURL. Use it for OpenAI-compatible vendors, for example
// "https://api.deepseek.com/v1", "https://dashscope.aliyuncs.com/compatible-mode/v1",
// "https://api.groq.com/openai/v1", "https://openrouter.ai/api/v1",
// "http://localhost:8000/v1" (vLLM) or "http://localhost:11434/v1" (Ollama).
// It must be an absolute http(s) URL without query or fragment.
func WithBaseURL(baseURL string) Option {
	return optionFunc(func(c *config) { c.baseURL = baseURL })
}

// WithAPIKey sets the key sent when a call carries none (llmclient.Call.APIKey is empty):
// as "Authorization: Bearer <key>", or as the "api-key" header with WithAzure. Default none:
// no auth header is sent, which suits local servers.
func WithAPIKey(key string) Option {
	return optionFunc(func(c *config) { c.apiKey = key })
}

// WithHTTPClient sets the HTTP client. Default: a new client from an internal
// constructor with dial, TLS and response-header timeouts and no overall timeout (an
// overall timeout would cut long streams; bound calls with their context). Must not be nil.
// The Provider uses a copy that shares its Transport and follows a redirect only to the
// same host, never from https to http, so that no credential header goes elsewhere; a
// redirect it does not follow is returned as an error with the 3xx status.
func WithHTTPClient(client *http.Client) Option {
	return optionFunc(func(c *config) { c.client, c.clientSet = client, true })
}

// WithOrganization sets the OpenAI-Organization header. Default none.
func WithOrganization(org string) Option {
	return optionFunc(func(c *config) { c.organization = org })
}

// WithProject sets the OpenAI-Project header. Default none.
func WithProject(project string) Option {
	return optionFunc(func(c *config) { c.project = project })
}

// WithHeader adds a header sent with every request, for gateways that want their own
// (for example OpenRouter's HTTP-Referer). Repeat it for several headers; a later value for
// the same key replaces an earlier one. The adapter's own Content-Type, Accept and
// authentication headers are set after these and win.
func WithHeader(key, value string) Option {
	return optionFunc(func(c *config) { c.headers = append(c.headers, [2]string{key, value}) })
}

// WithAzure selects Azure OpenAI: requests go to
// {endpoint}/openai/deployments/{deployment}/chat/completions?api-version={apiVersion},
// where the deployment is the call's model name, and the key is sent in the "api-key"
// header. endpoint is the resource URL, such as "https://my-resource.openai.azure.com".
// WithAzure replaces WithBaseURL. Default: not Azure.
func WithAzure(endpoint, apiVersion string) Option {
	return optionFunc(func(c *config) { c.azure, c.azureURL, c.azureVersion = true, endpoint, apiVersion })
}

// WithMaxTokensField names the JSON field that carries Request.MaxTokens:
// FieldMaxCompletionTokens or FieldMaxTokens.
//
// Default: FieldMaxCompletionTokens for OpenAI (host api.openai.com) and Azure OpenAI,
// where newer models reject max_tokens; FieldMaxTokens for every other base URL, because
// many compatible vendors ignore or reject max_completion_tokens, and an ignored output
// bound silently breaks cost and TPM accounting.
func WithMaxTokensField(name string) Option {
	return optionFunc(func(c *config) { c.maxField = name })
}

// WithStreamUsage sets whether streaming requests ask for a final usage chunk with
// stream_options.include_usage. Default true. Turn it off for servers that reject
// stream_options.
func WithStreamUsage(enabled bool) Option {
	return optionFunc(func(c *config) { c.streamUsage = enabled })
}

// New returns a Provider configured by opts. It validates the configuration and returns
// an error starting with "openai: " when it is wrong.
func New(opts ...Option) (*Provider, error) {
	c := config{baseURL: DefaultBaseURL, streamUsage: true, maxEmbedBatch: DefaultMaxEmbedBatch}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	p := &Provider{apiKey: c.apiKey, streamUsage: c.streamUsage, header: make(http.Header),
		responses: c.responses, maxEmbedBatch: c.maxEmbedBatch}
	if c.maxEmbedBatch < 1 || c.maxEmbedBatch > MaxEmbeddingInputs {
		return nil, errors.New("openai: WithMaxEmbedBatch: want 1 to " + strconv.Itoa(MaxEmbeddingInputs) + ", got " + strconv.Itoa(c.maxEmbedBatch))
	}

	p.sender = adapter.Sender{Pkg: "openai", Client: c.client, Classify: classifyErrorAt}
	switch {
	case !c.clientSet:
		p.sender.Client = httpx.DefaultClient()
	case c.client == nil:
		return nil, errors.New("openai: WithHTTPClient: client is nil")
	}
	p.sender.Client = adapter.GuardRedirects(p.sender.Client)

	var host string
	if c.azure {
		u, err := parseBase(c.azureURL, "WithAzure endpoint")
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(c.azureVersion) == "" {
			return nil, errors.New("openai: WithAzure: api version is empty")
		}
		p.azure = true
		p.azurePrefix = httpx.JoinURL(u.String(), "openai/deployments") + "/"
		p.azureQuery = "?api-version=" + url.QueryEscape(c.azureVersion)
	} else {
		u, err := parseBase(c.baseURL, "base URL")
		if err != nil {
			return nil, err
		}
		host = u.Hostname()
		p.base = strings.TrimRight(u.String(), "/")
	}

	switch c.maxField {
	case FieldMaxCompletionTokens, FieldMaxTokens:
		p.maxField = c.maxField
	case "":
		p.maxField = FieldMaxTokens
		if c.azure || isOpenAIHost(host) {
			p.maxField = FieldMaxCompletionTokens
		}
	default:
		return nil, errors.New("openai: WithMaxTokensField: want \"max_completion_tokens\" or \"max_tokens\", got " + quote(c.maxField))
	}

	for _, kv := range c.headers {
		if !httpx.ValidHeaderName(kv[0]) {
			return nil, errors.New("openai: WithHeader: invalid header name " + quote(kv[0]))
		}
		if !httpx.ValidHeaderValue(kv[1]) {
			return nil, errors.New("openai: WithHeader: invalid value for header " + quote(kv[0]))
		}
		p.header.Set(kv[0], kv[1])
	}
	for _, kv := range [...][2]string{{"OpenAI-Organization", c.organization}, {"OpenAI-Project", c.project}} {
		if kv[1] == "" {
			continue
		}
		if !httpx.ValidHeaderValue(kv[1]) {
			return nil, errors.New("openai: invalid " + kv[0] + " value")
		}
		p.header.Set(kv[0], kv[1])
	}
	if err := httpx.CheckAPIKey(c.apiKey); err != nil {
		return nil, errors.New("openai: " + err.Error())
	}
	return p, nil
}

// parseBase checks that s is an absolute http(s) URL without query or fragment.
func parseBase(s, what string) (*url.URL, error) {
	// Errors do not echo the URL: a malformed one may carry a secret in its query.
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return nil, errors.New("openai: " + what + ": not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, errors.New("openai: " + what + ": want an absolute http or https URL with a host, got scheme " + quote(u.Scheme))
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, errors.New("openai: " + what + ": must not contain a query, fragment or user info")
	}
	return u, nil
}

// isOpenAIHost reports whether host is OpenAI's own API (including regional hosts such as
// eu.api.openai.com).
func isOpenAIHost(host string) bool {
	host = strings.ToLower(host)
	return host == "api.openai.com" || strings.HasSuffix(host, ".api.openai.com")
}

// quote shortens and quotes a user-supplied value for an error message.
func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return `"` + s + `"`
}
