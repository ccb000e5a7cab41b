package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strconv"

	"github.com/llmclient/llmclient"
)

// The Chat Completions request body. Field order here is the order on the wire; every
// optional field is omitted when unset, so the body is deterministic.
type reqBody struct {
	Model               string             `json:"model,omitempty"`
	Messages            []reqMessage       `json:"messages"`
	Tools               []reqTool          `json:"tools,omitempty"`
	ToolChoice          any                `json:"tool_choice,omitempty"`
	MaxTokens           int                `json:"max_tokens,omitempty"`
	MaxCompletionTokens int                `json:"max_completion_tokens,omitempty"`
	Temperature         *float64           `json:"temperature,omitempty"`
	TopP                *float64           `json:"top_p,omitempty"`
	Stop                []string           `json:"stop,omitempty"`
	ResponseFormat      *reqResponseFormat `json:"response_format,omitempty"`
	Stream              bool               `json:"stream,omitempty"`
	StreamOptions       *reqStreamOptions  `json:"stream_options,omitempty"`
}

type reqMessage struct {
	Role string `json:"role"`
	// Content is a string for a single text part, a []reqPart otherwise, and nil
	// (omitted) for an assistant message that only calls tools.
	Content    any           `json:"content,omitempty"`
	Name       string        `json:"name,omitempty"`
	ToolCalls  []reqToolCall `json:"tool_calls,omitempty"`
	ToolCallID string        `json:"tool_call_id,omitempty"`
}

type reqPart struct {
	Type     string       `json:"type"`
	Text     *string      `json:"text,omitempty"`
	ImageURL *reqImageURL `json:"image_url,omitempty"`
}

type reqImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

type reqToolCall struct {
	ID       string          `json:"id"`
	Type     string          `json:"type"`
	Function reqFunctionCall `json:"function"`
}

type reqFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type reqTool struct {
	Type     string         `json:"type"`
	Function reqFunctionDef `json:"function"`
}

type reqFunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      bool            `json:"strict,omitempty"`
}

type reqNamedToolChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

type reqResponseFormat struct {
	Type       string         `json:"type"`
	JSONSchema *reqJSONSchema `json:"json_schema,omitempty"`
}

type reqJSONSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict bool            `json:"strict,omitempty"`
}

type reqStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// defaultSchemaName names a json_schema response format whose Name is empty; OpenAI
// requires a name.
const defaultSchemaName = "response"

// buildBody encodes req as a Chat Completions body for model. maxField is the JSON name of
// the output bound. Request.Metadata and Request.Priority are never sent. Request.Extra is
// merged into the top level and overrides the adapter's fields, except "stream", which the
// adapter owns (Complete must not receive an event stream, nor Stream a single JSON body).
func buildBody(req *llmclient.Request, model, maxField string, stream, includeUsage bool) ([]byte, error) {
	if len(req.Messages) == 0 {
		return nil, errors.New("openai: request has no messages")
	}
	body := reqBody{
		Model:       model,
		Temperature: req.Temperature,
		TopP:        req.TopP,
		Stop:        req.Stop,
		Stream:      stream,
	}
	if req.MaxTokens < 0 {
		return nil, errors.New("openai: MaxTokens is negative")
	}
	if maxField == FieldMaxTokens {
		body.MaxTokens = req.MaxTokens
	} else {
		body.MaxCompletionTokens = req.MaxTokens
	}
	if includeUsage {
		body.StreamOptions = &reqStreamOptions{IncludeUsage: true}
	}

	body.Messages = make([]reqMessage, len(req.Messages))
	for i := range req.Messages {
		m, err := buildMessage(&req.Messages[i])
		if err != nil {
			return nil, errors.New("openai: message " + strconv.Itoa(i) + ": " + err.Error())
		}
		body.Messages[i] = m
	}
	if len(req.Tools) > 0 {
		body.Tools = make([]reqTool, len(req.Tools))
		for i, t := range req.Tools {
			if t.Name == "" {
				return nil, errors.New("openai: tool " + strconv.Itoa(i) + ": name is empty")
			}
			body.Tools[i] = reqTool{Type: "function", Function: reqFunctionDef{
				Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict,
			}}
		}
	}
	tc, err := buildToolChoice(req.ToolChoice)
	if err != nil {
		return nil, err
	}
	body.ToolChoice = tc
	if body.ResponseFormat, err = buildResponseFormat(req.ResponseFormat); err != nil {
		return nil, err
	}

	b, err := marshal(&body)
	if err != nil {
		return nil, errors.New("openai: encoding request: " + err.Error())
	}
	if len(req.Extra) == 0 {
		return b, nil
	}
	return mergeExtra(b, req.Extra)
}

func buildMessage(m *llmclient.Message) (reqMessage, error) {
	if m.Role == "" {
		return reqMessage{}, errors.New("role is empty")
	}
	out := reqMessage{Role: string(m.Role), ToolCallID: m.ToolCallID}
	if m.Role != llmclient.RoleTool {
		// The spec has no name on tool messages; strict servers reject unknown fields.
		out.Name = m.Name
	}
	if m.Role == llmclient.RoleTool && m.ToolCallID == "" {
		return reqMessage{}, errors.New("tool message without ToolCallID")
	}
	for _, tc := range m.ToolCalls {
		args := tc.Arguments
		if args == "" {
			args = "{}" // arguments is a required JSON object string
		}
		out.ToolCalls = append(out.ToolCalls, reqToolCall{
			ID: tc.ID, Type: "function", Function: reqFunctionCall{Name: tc.Name, Arguments: args},
		})
	}
	switch {
	case len(m.Content) == 0:
		if len(m.ToolCalls) == 0 {
			out.Content = "" // content is required on every other message
		}
	case len(m.Content) == 1 && m.Content[0].Type == llmclient.PartText:
		out.Content = m.Content[0].Text
	default:
		parts := make([]reqPart, len(m.Content))
		for i := range m.Content {
			p, err := buildPart(&m.Content[i])
			if err != nil {
				return reqMessage{}, errors.New("part " + strconv.Itoa(i) + ": " + err.Error())
			}
			parts[i] = p
		}
		out.Content = parts
	}
	return out, nil
}

func buildPart(p *llmclient.Part) (reqPart, error) {
	switch p.Type {
	case llmclient.PartText:
		text := p.Text
		return reqPart{Type: "text", Text: &text}, nil
	case llmclient.PartImage:
		u := p.ImageURL
		if u == "" {
			if len(p.ImageData) == 0 {
				return reqPart{}, errors.New("image part has neither ImageURL nor ImageData")
			}
			u = dataURL(p.MIMEType, p.ImageData)
		}
		return reqPart{Type: "image_url", ImageURL: &reqImageURL{URL: u, Detail: p.Detail}}, nil
	}
	return reqPart{}, errors.New("unknown part type " + strconv.Itoa(int(p.Type)))
}

// dataURL encodes image bytes as a base64 data URL. An empty MIME type is sniffed from the
// bytes (PNG, JPEG, GIF and WebP are recognized).
func dataURL(mime string, data []byte) string {
	if mime == "" {
		mime = http.DetectContentType(data)
	}
	const sep = ";base64,"
	b := make([]byte, 0, len("data:")+len(mime)+len(sep)+base64.StdEncoding.EncodedLen(len(data)))
	b = append(b, "data:"...)
	b = append(b, mime...)
	b = append(b, sep...)
	b = base64.StdEncoding.AppendEncode(b, data)
	return string(b)
}

func buildToolChoice(tc *llmclient.ToolChoice) (any, error) {
	if tc == nil {
		return nil, nil
	}
	switch tc.Mode {
	case llmclient.ToolChoiceAuto, llmclient.ToolChoiceNone, llmclient.ToolChoiceRequired:
		return string(tc.Mode), nil
	case llmclient.ToolChoiceTool, "":
		if tc.Name == "" {
			if tc.Mode == "" {
				return nil, nil
			}
			return nil, errors.New("openai: tool choice \"tool\" needs a tool name")
		}
		var n reqNamedToolChoice
		n.Type = "function"
		n.Function.Name = tc.Name
		return &n, nil
	}
	return nil, errors.New("openai: unknown tool choice mode " + strconv.Quote(string(tc.Mode)))
}

func buildResponseFormat(rf *llmclient.ResponseFormat) (*reqResponseFormat, error) {
	if rf == nil {
		return nil, nil
	}
	switch rf.Type {
	case llmclient.FormatText, llmclient.FormatJSONObject:
		return &reqResponseFormat{Type: string(rf.Type)}, nil
	case llmclient.FormatJSONSchema:
		if len(rf.Schema) == 0 {
			return nil, errors.New("openai: response format json_schema needs a Schema")
		}
		name := rf.Name
		if name == "" {
			name = defaultSchemaName
		}
		return &reqResponseFormat{Type: "json_schema", JSONSchema: &reqJSONSchema{Name: name, Schema: rf.Schema, Strict: rf.Strict}}, nil
	case "":
		return nil, nil
	}
	return nil, errors.New("openai: unknown response format " + strconv.Quote(string(rf.Type)))
}

// mergeExtra overlays extra on the top level of the encoded object b. The keys of the
// result are sorted (encoding/json sorts map keys), so the output stays deterministic.
func mergeExtra(b []byte, extra map[string]any) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, errors.New("openai: encoding request: " + err.Error())
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "stream" {
			continue
		}
		v, err := marshal(extra[k])
		if err != nil {
			return nil, errors.New("openai: encoding Extra[" + strconv.Quote(k) + "]: " + err.Error())
		}
		top[k] = v
	}
	return marshal(top)
}

// marshal encodes v as compact JSON without escaping <, > and &: prompts are full of them
// and escaping would only inflate the body.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
