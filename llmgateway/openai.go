package llmgateway

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/format"
)

// The OpenAI Chat Completions and Embeddings wire types the front door reads and
// writes (the fields the common llmclient types carry).

type oaChatRequest struct {
	Model               string          `json:"model"`
	Messages            []oaMessage     `json:"messages"`
	Tools               []oaTool        `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	Stop                json.RawMessage `json:"stop"`
	ResponseFormat      *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		} `json:"json_schema"`
	} `json:"response_format"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	N              *int   `json:"n"`
	PromptCacheKey string `json:"prompt_cache_key"`
}

type oaMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCalls  []oaToolCall    `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type oaPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL    string `json:"url"`
		Detail string `json:"detail"`
	} `json:"image_url"`
}

type oaToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oaTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	} `json:"function"`
}

// decodeOpenAIChat turns a Chat Completions body into a Request, reporting whether it
// asks for a stream and for the usage chunk.
func decodeOpenAIChat(body []byte) (req *llmclient.Request, stream, includeUsage bool, err error) {
	var in oaChatRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, false, false, fmt.Errorf("the body is not a JSON chat completion request: %v", err)
	}
	if in.Model == "" {
		return nil, false, false, fmt.Errorf("model: required")
	}
	if len(in.Messages) == 0 {
		return nil, false, false, fmt.Errorf("messages: at least one is required")
	}
	if in.N != nil && *in.N != 1 {
		return nil, false, false, fmt.Errorf("n: only 1 is supported")
	}
	req = &llmclient.Request{Model: in.Model, Temperature: in.Temperature, TopP: in.TopP, PromptCacheKey: in.PromptCacheKey,
		DisableParallelToolCalls: in.ParallelToolCalls != nil && !*in.ParallelToolCalls}
	// OpenAI refuses a limit below 1 (0 is not "the default": leaving the field out is).
	for _, f := range [...]struct {
		name string
		v    *int
	}{{"max_tokens", in.MaxTokens}, {"max_completion_tokens", in.MaxCompletionTokens}} {
		if f.v != nil && *f.v < 1 {
			return nil, false, false, &fieldError{param: f.name, code: "integer_below_min_value",
				msg: fmt.Sprintf("Invalid '%s': integer below minimum value. Expected a value >= 1, but got %d instead.", f.name, *f.v)}
		}
	}
	switch {
	case in.MaxCompletionTokens != nil:
		req.MaxTokens = *in.MaxCompletionTokens
	case in.MaxTokens != nil:
		req.MaxTokens = *in.MaxTokens
	}
	for i, m := range in.Messages {
		msg, err := m.message()
		if err != nil {
			return nil, false, false, fmt.Errorf("messages[%d]: %v", i, err)
		}
		req.Messages = append(req.Messages, msg)
	}
	for i, t := range in.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return nil, false, false, fmt.Errorf("tools[%d]: only function tools with a name are supported", i)
		}
		req.Tools = append(req.Tools, llmclient.Tool{
			Name: t.Function.Name, Description: t.Function.Description,
			Parameters: nullToNil(t.Function.Parameters), Strict: t.Function.Strict != nil && *t.Function.Strict,
		})
	}
	if tc := bytes.TrimSpace(in.ToolChoice); len(tc) > 0 && string(tc) != "null" {
		var mode string
		if json.Unmarshal(tc, &mode) == nil {
			switch mode {
			case "auto", "none", "required":
				req.ToolChoice = &llmclient.ToolChoice{Mode: llmclient.ToolChoiceMode(mode)}
			default:
				return nil, false, false, fmt.Errorf("tool_choice: %q is not auto, none or required", mode)
			}
		} else {
			var named struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			if json.Unmarshal(tc, &named) != nil || named.Function.Name == "" {
				return nil, false, false, fmt.Errorf("tool_choice: not a mode or a named function")
			}
			req.ToolChoice = &llmclient.ToolChoice{Mode: llmclient.ToolChoiceTool, Name: named.Function.Name}
		}
	}
	if s := bytes.TrimSpace(in.Stop); len(s) > 0 && string(s) != "null" {
		var one string
		if json.Unmarshal(s, &one) == nil {
			req.Stop = []string{one}
		} else if err := json.Unmarshal(s, &req.Stop); err != nil {
			return nil, false, false, fmt.Errorf("stop: a string or an array of strings")
		}
	}
	if rf := in.ResponseFormat; rf != nil {
		switch rf.Type {
		case "text", "":
		case "json_object":
			req.ResponseFormat = &llmclient.ResponseFormat{Type: format.JSONObject}
		case "json_schema":
			if rf.JSONSchema == nil {
				return nil, false, false, fmt.Errorf("response_format: json_schema is required")
			}
			req.ResponseFormat = &llmclient.ResponseFormat{
				Type: format.JSONSchema, Name: rf.JSONSchema.Name, Schema: rf.JSONSchema.Schema,
				Strict: rf.JSONSchema.Strict != nil && *rf.JSONSchema.Strict,
			}
		default:
			return nil, false, false, fmt.Errorf("response_format: type %q is not supported", rf.Type)
		}
	}
	return req, in.Stream, in.StreamOptions != nil && in.StreamOptions.IncludeUsage, nil
}

func nullToNil(r json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(r)) == 0 || string(bytes.TrimSpace(r)) == "null" {
		return nil
	}
	return r
}

func (m oaMessage) message() (llmclient.Message, error) {
	out := llmclient.Message{Name: m.Name}
	switch m.Role {
	case "system", "developer":
		out.Role = llmclient.RoleSystem
	case "user":
		out.Role = llmclient.RoleUser
	case "assistant":
		out.Role = llmclient.RoleAssistant
	case "tool":
		out.Role, out.ToolCallID = llmclient.RoleTool, m.ToolCallID
		if m.ToolCallID == "" {
			return out, fmt.Errorf("tool_call_id: required for a tool message")
		}
	default:
		return out, fmt.Errorf("role %q is not system, developer, user, assistant or tool", m.Role)
	}
	c := bytes.TrimSpace(m.Content)
	switch {
	case len(c) == 0 || string(c) == "null":
	case c[0] == '"':
		var s string
		if err := json.Unmarshal(c, &s); err != nil {
			return out, fmt.Errorf("content: %v", err)
		}
		out.Content = []llmclient.Part{llmclient.TextPart(s)}
	case c[0] == '[':
		var parts []oaPart
		if err := json.Unmarshal(c, &parts); err != nil {
			return out, fmt.Errorf("content: %v", err)
		}
		for i, p := range parts {
			switch p.Type {
			case "text", "input_text":
				out.Content = append(out.Content, llmclient.TextPart(p.Text))
			case "image_url":
				if p.ImageURL == nil || p.ImageURL.URL == "" {
					return out, fmt.Errorf("content[%d]: image_url.url is required", i)
				}
				part := llmclient.ImageURLPart(p.ImageURL.URL)
				part.Detail = p.ImageURL.Detail
				out.Content = append(out.Content, part)
			default:
				return out, fmt.Errorf("content[%d]: part type %q is not supported", i, p.Type)
			}
		}
	default:
		return out, fmt.Errorf("content: a string or an array of parts")
	}
	for _, tc := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, llmclient.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return out, nil
}

// The answer types.

type oaChatResponse struct {
	ID                string     `json:"id"`
	Object            string     `json:"object"`
	Created           int64      `json:"created"`
	Model             string     `json:"model"`
	Choices           []oaChoice `json:"choices"`
	Usage             *oaUsage   `json:"usage,omitempty"`
	SystemFingerprint *string    `json:"system_fingerprint"`
}

type oaChoice struct {
	Index        int             `json:"index"`
	Message      oaOutMessage    `json:"message"`
	FinishReason string          `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"`
}

type oaOutMessage struct {
	Role             string       `json:"role"`
	Content          *string      `json:"content"`
	Refusal          *string      `json:"refusal"`
	ReasoningContent string       `json:"reasoning_content,omitempty"`
	ToolCalls        []oaToolCall `json:"tool_calls,omitempty"`
}

type oaUsage struct {
	PromptTokens            int              `json:"prompt_tokens"`
	CompletionTokens        int              `json:"completion_tokens"`
	TotalTokens             int              `json:"total_tokens"`
	PromptTokensDetails     *oaPromptDetails `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details,omitempty"`
}

// oaPromptDetails are usage.prompt_tokens_details: the prompt's tokens read from and
// written to the vendor's prompt cache.
type oaPromptDetails struct {
	CachedTokens     int `json:"cached_tokens"`
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
}

func oaUsageOf(u llmclient.Usage) *oaUsage {
	out := &oaUsage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.TotalTokens}
	if out.TotalTokens == 0 {
		out.TotalTokens = u.InputTokens + u.OutputTokens
	}
	out.PromptTokensDetails = &oaPromptDetails{CachedTokens: u.CachedInputTokens, CacheWriteTokens: u.CacheWriteTokens}
	out.CompletionTokensDetails = &struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	}{u.ReasoningTokens}
	return out
}

// oaFinish is the Chat Completions finish_reason of f. refusal says whether the answer
// carries a refusal message (message.refusal): a refusal with one ends "stop", as OpenAI
// ends its own; one without (Anthropic's stop_reason "refusal": its classifiers cut the
// answer, and no refusal text is given apart from the content) is "content_filter", the
// finish_reason of content cut for a policy flag.
func oaFinish(f finish.Reason, refusal bool) string {
	switch f {
	case finish.Length:
		return "length"
	case finish.ToolCalls:
		return "tool_calls"
	case finish.ContentFilter:
		return "content_filter"
	case finish.Refusal:
		if !refusal {
			return "content_filter"
		}
	}
	return "stop"
}

var nullJSON = json.RawMessage("null")

func encodeOpenAIChat(resp *llmclient.Response, id, model string, created int64) []byte {
	msg := oaOutMessage{Role: "assistant", ReasoningContent: resp.Reasoning}
	if resp.Text != "" || len(resp.ToolCalls) == 0 {
		t := resp.Text
		msg.Content = &t
	}
	if resp.Refusal != "" {
		r := resp.Refusal
		msg.Refusal = &r
	}
	for _, tc := range resp.ToolCalls {
		c := oaToolCall{ID: tc.ID, Type: "function"}
		c.Function.Name, c.Function.Arguments = tc.Name, tc.Arguments
		msg.ToolCalls = append(msg.ToolCalls, c)
	}
	out := oaChatResponse{
		ID: id, Object: "chat.completion", Created: created, Model: model,
		Choices: []oaChoice{{Message: msg, FinishReason: oaFinish(resp.FinishReason, resp.Refusal != ""), Logprobs: nullJSON}},
		Usage:   oaUsageOf(resp.Usage),
	}
	b, _ := json.Marshal(out)
	return b
}

// Stream chunks.

type oaChunk struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint *string      `json:"system_fingerprint"`
	Choices           []oaChunkChc `json:"choices"`
	Usage             *oaUsage     `json:"usage"`
}

type oaChunkChc struct {
	Index        int             `json:"index"`
	Delta        oaDelta         `json:"delta"`
	FinishReason *string         `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"`
}

type oaDelta struct {
	Role             string       `json:"role,omitempty"`
	Content          *string      `json:"content,omitempty"`
	ReasoningContent string       `json:"reasoning_content,omitempty"`
	Refusal          *string      `json:"refusal,omitempty"`
	ToolCalls        []oaToolCall `json:"tool_calls,omitempty"`
}

// oaStreamWriter renders Chunks as Chat Completions SSE events.
type oaStreamWriter struct {
	id, model string
	created   int64
	started   bool
	refused   bool // a refusal message was sent
	// tools holds the upstream's tool-call indexes in the order they first came: a
	// call's position here is its tool_calls index. OpenAI numbers the calls 0, 1, …
	// and the SDKs accumulate by that number; other vendors number them otherwise
	// (Anthropic by content block, after any text block).
	tools []int
	buf   bytes.Buffer
}

// toolIndex is the tool_calls index of the upstream's tool-call index i.
func (s *oaStreamWriter) toolIndex(i int) int {
	for n, u := range s.tools {
		if u == i {
			return n
		}
	}
	s.tools = append(s.tools, i)
	return len(s.tools) - 1
}

// chunk renders c as one SSE event (nothing for a chunk without content or finish).
func (s *oaStreamWriter) chunk(c llmclient.Chunk) []byte {
	var d oaDelta
	if !s.started {
		d.Role = "assistant"
	}
	if c.Text != "" {
		t := c.Text
		d.Content = &t
	} else if !s.started && c.Refusal == "" {
		empty := ""
		d.Content = &empty
	}
	d.ReasoningContent = c.Reasoning
	if c.Refusal != "" {
		r := c.Refusal
		d.Refusal = &r
		s.refused = true
	}
	for _, tc := range c.ToolCalls {
		if tc.ID == "" && tc.Name == "" && tc.Arguments == "" {
			continue // carries no part of a call
		}
		idx := s.toolIndex(tc.Index)
		t := oaToolCall{Index: &idx, ID: tc.ID}
		if tc.ID != "" || tc.Name != "" {
			t.Type = "function"
		}
		t.Function.Name, t.Function.Arguments = tc.Name, tc.Arguments
		d.ToolCalls = append(d.ToolCalls, t)
	}
	ch := oaChunkChc{Delta: d, Logprobs: nullJSON}
	if c.FinishReason != finish.None {
		f := oaFinish(c.FinishReason, s.refused)
		ch.FinishReason = &f
	}
	if s.started && !c.HasContent() && ch.FinishReason == nil {
		return nil
	}
	s.started = true
	return s.event(oaChunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model, Choices: []oaChunkChc{ch}})
}

// usage renders the usage chunk: no choices, the call's usage.
func (s *oaStreamWriter) usage(u llmclient.Usage) []byte {
	return s.event(oaChunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model, Choices: []oaChunkChc{}, Usage: oaUsageOf(u)})
}

func (s *oaStreamWriter) event(v any) []byte {
	s.buf.Reset()
	s.buf.WriteString("data: ")
	enc := json.NewEncoder(&s.buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	s.buf.Truncate(s.buf.Len() - 1)
	s.buf.WriteString("\n\n")
	return s.buf.Bytes()
}

var oaDone = []byte("data: [DONE]\n\n")

// Embeddings.

type oaEmbedRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	Dimensions     int             `json:"dimensions"`
	EncodingFormat string          `json:"encoding_format"`
}

func decodeOpenAIEmbed(body []byte) (*llmclient.EmbedRequest, bool, error) {
	var in oaEmbedRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, false, fmt.Errorf("the body is not a JSON embeddings request: %v", err)
	}
	if in.Model == "" {
		return nil, false, fmt.Errorf("model: required")
	}
	req := &llmclient.EmbedRequest{Model: in.Model, Dimensions: in.Dimensions}
	raw := bytes.TrimSpace(in.Input)
	var one string
	switch {
	case len(raw) == 0:
		return nil, false, fmt.Errorf("input: required")
	case json.Unmarshal(raw, &one) == nil:
		req.Input = []string{one}
	default:
		if err := json.Unmarshal(raw, &req.Input); err != nil {
			return nil, false, fmt.Errorf("input: a string or an array of strings (token arrays are not supported)")
		}
	}
	switch in.EncodingFormat {
	case "", "float":
		return req, false, nil
	case "base64":
		return req, true, nil
	}
	return nil, false, fmt.Errorf("encoding_format: %q is not float or base64", in.EncodingFormat)
}

type oaEmbedding struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

func encodeOpenAIEmbed(resp *llmclient.EmbedResponse, model string, b64 bool) []byte {
	data := make([]oaEmbedding, len(resp.Vectors))
	for i, v := range resp.Vectors {
		var e any = finite(v)
		if b64 {
			buf := make([]byte, 4*len(v))
			for j, f := range v {
				binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(f))
			}
			e = base64.StdEncoding.EncodeToString(buf)
		}
		data[i] = oaEmbedding{Object: "embedding", Index: i, Embedding: e}
	}
	if resp.Model != "" {
		model = resp.Model
	}
	out := struct {
		Object string        `json:"object"`
		Data   []oaEmbedding `json:"data"`
		Model  string        `json:"model"`
		Usage  struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}{Object: "list", Data: data, Model: model}
	out.Usage.PromptTokens, out.Usage.TotalTokens = resp.Usage.InputTokens, resp.Usage.InputTokens
	b, _ := json.Marshal(out)
	return b
}

// finite replaces NaN and infinities (which JSON cannot carry) by 0.
func finite(v []float32) []float32 {
	for _, f := range v {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			w := make([]float32, len(v))
			for i, g := range v {
				if !math.IsNaN(float64(g)) && !math.IsInf(float64(g), 0) {
					w[i] = g
				}
			}
			return w
		}
	}
	return v
}
