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
	"github.com/llmclient/llmclient/format"
	"github.com/llmclient/llmclient/internal/adapter"
)

// The Chat Completions request body. Field order here is the order on the wire; every
// optional field is omitted when unset, so the body is deterministic.
type reqBody struct {
	Model               string             `json:"model,omitempty"`
	Messages            []reqMessage       `json:"messages"`
	Tools               []reqTool          `json:"tools,omitempty"`
	ToolChoice          any                `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool              `json:"parallel_tool_calls,omitempty"`
	MaxTokens           int                `json:"max_tokens,omitempty"`
	MaxCompletionTokens int                `json:"max_completion_tokens,omitempty"`
	Temperature         *float64           `json:"temperature,omitempty"`
	TopP                *float64           `json:"top_p,omitempty"`
	Stop                []string           `json:"stop,omitempty"`
	ResponseFormat      *reqResponseFormat `json:"response_format,omitempty"`
	Stream              bool               `json:"stream,omitempty"`
	StreamOptions       *reqStreamOptions  `json:"stream_options,omitempty"`
	PromptCacheKey      string             `json:"prompt_cache_key,omitempty"`
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

// The Chat Completions limits the adapter enforces. Sampling parameters outside their
// range are clamped and extra stop sequences dropped, with a note.
const (
	maxTemperature = 2
	maxTopP        = 1
	// maxStop is StopConfiguration's maxItems.
	maxStop = 4
	// maxToolCallID is the tool call id length OpenAI accepts ("string too long. Expected a
	// string with maximum length 40"); longer ids from other vendors (Gemini's signed ids)
	// are shortened with adapter.CapID.
	maxToolCallID = 40
	// maxPromptCacheKey is the Responses API's maxLength of prompt_cache_key, in
	// characters (its OpenAPI schema; Chat Completions' states none).
	maxPromptCacheKey = 64
)

// buildBody encodes req as a Chat Completions body for model, recording how it
// translated the request in notes. maxField is the JSON name of the output bound.
// Request.Metadata and Request.Priority are never sent; Request.PromptCacheKey is
// prompt_cache_key. Request.Extra is merged into the
// top level and overrides the adapter's fields, except "stream", which the adapter owns
// (Complete must not receive an event stream, nor Stream a single JSON body).
func buildBody(req *llmclient.Request, model, maxField string, stream, includeUsage bool, notes *adapter.Notes) ([]byte, error) {
	if len(req.Messages) == 0 {
		return nil, errors.New("openai: request has no messages")
	}
	body := reqBody{
		Model:          model,
		Stop:           adapter.LimitStops(notes, req.Stop, maxStop),
		Stream:         stream,
		PromptCacheKey: req.PromptCacheKey,
	}
	var err error
	if body.Temperature, err = adapter.Clamp(notes, "temperature", req.Temperature, 0, maxTemperature); err != nil {
		return nil, errors.New("openai: " + err.Error())
	}
	if body.TopP, err = adapter.Clamp(notes, "top_p", req.TopP, 0, maxTopP); err != nil {
		return nil, errors.New("openai: " + err.Error())
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

	if body.Messages, err = buildMessages(req.Messages, model, notes); err != nil {
		return nil, err
	}
	noteToolErrors(req.Messages, notes)
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
	body.ParallelToolCalls = parallelToolCalls(req)
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

// buildMessages converts the conversation. Chat Completions takes only text in system and
// tool messages and only text (or a refusal) in assistant messages, so: images of a system
// message move to a user message right after it; images of tool results move to one user
// message after the run of tool messages (tool messages must directly follow the
// assistant turn that called them), each introduced by the call id; an image in an
// assistant message cannot be placed and is refused with adapter.Unsupported.
func buildMessages(msgs []llmclient.Message, model string, notes *adapter.Notes) ([]reqMessage, error) {
	out := make([]reqMessage, 0, len(msgs))
	var moved []reqPart // images of the current run of tool results
	flush := func() {
		if len(moved) > 0 {
			out = append(out, reqMessage{Role: "user", Content: moved})
			moved = nil
		}
	}
	for i := range msgs {
		m := &msgs[i]
		if m.Role != llmclient.RoleTool {
			flush()
		}
		text, images := splitImages(m.Content)
		if len(images) > 0 {
			switch m.Role {
			case llmclient.RoleAssistant:
				return nil, adapter.Unsupported("openai", model, "message "+strconv.Itoa(i)+
					": an assistant message with an image (Chat Completions takes only text in assistant messages)")
			case llmclient.RoleSystem, llmclient.RoleTool:
				cp := *m
				cp.Content = text
				if m.Role == llmclient.RoleTool && len(text) == 0 {
					cp.Content = []llmclient.Part{llmclient.TextPart("(The result is the image in the next user message.)")}
				}
				m = &cp
			}
		}
		rm, err := buildMessage(m, notes)
		if err != nil {
			return nil, errors.New("openai: message " + strconv.Itoa(i) + ": " + err.Error())
		}
		if len(images) == 0 || m.Role == llmclient.RoleUser {
			out = append(out, rm)
			continue
		}
		parts := make([]reqPart, 0, len(images)+1)
		intro := "Images of the system prompt:"
		if m.Role == llmclient.RoleTool {
			intro = "Images returned by tool call " + rm.ToolCallID + ":"
		}
		parts = append(parts, reqPart{Type: "text", Text: &intro})
		for j := range images {
			p, err := buildPart(&images[j])
			if err != nil {
				return nil, errors.New("openai: message " + strconv.Itoa(i) + ": " + err.Error())
			}
			parts = append(parts, p)
		}
		notes.Add("message %d: %d image(s) of a %s message moved to a user message (%s messages take text only)", i, len(images), m.Role, m.Role)
		if m.Role == llmclient.RoleTool {
			out = append(out, rm)
			moved = append(moved, parts...)
			continue
		}
		if len(text) > 0 {
			out = append(out, rm)
		}
		out = append(out, reqMessage{Role: "user", Content: parts})
	}
	flush()
	return out, nil
}

// splitImages separates a message's image parts from the others, keeping their order.
// It returns parts itself when there are no images.
func splitImages(parts []llmclient.Part) (rest, images []llmclient.Part) {
	n := 0
	for i := range parts {
		if parts[i].Type == llmclient.PartImage {
			n++
		}
	}
	if n == 0 {
		return parts, nil
	}
	rest = make([]llmclient.Part, 0, len(parts)-n)
	images = make([]llmclient.Part, 0, n)
	for _, p := range parts {
		if p.Type == llmclient.PartImage {
			images = append(images, p)
		} else {
			rest = append(rest, p)
		}
	}
	return rest, images
}

// wireID returns the tool call id sent for id (see maxToolCallID), with a note when it
// differs.
func wireID(id string, notes *adapter.Notes) string {
	w := adapter.CapID(id, maxToolCallID)
	if w != id {
		notes.Add("tool call id %q sent as %q (OpenAI takes ids of at most %d characters)", id, w, maxToolCallID)
	}
	return w
}

func buildMessage(m *llmclient.Message, notes *adapter.Notes) (reqMessage, error) {
	if m.Role == "" {
		return reqMessage{}, errors.New("role is empty")
	}
	out := reqMessage{Role: string(m.Role)}
	if m.ToolCallID != "" {
		out.ToolCallID = wireID(m.ToolCallID, notes)
	}
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
			ID: wireID(tc.ID, notes), Type: "function", Function: reqFunctionCall{Name: tc.Name, Arguments: args},
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

// noParallel is parallel_tool_calls false.
var noParallel = new(bool)

// parallelToolCalls is the parallel_tool_calls field for req: false when it disables
// parallel calls and has tools (OpenAI refuses the field without tools), else omitted.
func parallelToolCalls(req *llmclient.Request) *bool {
	if req.DisableParallelToolCalls && len(req.Tools) > 0 {
		return noParallel
	}
	return nil
}

// noteToolErrors records that the error marks of tool results are not sent: neither
// tool messages nor function_call_output items have an error flag.
func noteToolErrors(msgs []llmclient.Message, notes *adapter.Notes) {
	for i := range msgs {
		if msgs[i].Role == llmclient.RoleTool && msgs[i].IsError {
			notes.Add("message %d: the tool result's error mark not sent (OpenAI tool results have no error flag; the result is sent as written)", i)
		}
	}
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
	case format.Text, format.JSONObject:
		return &reqResponseFormat{Type: string(rf.Type)}, nil
	case format.JSONSchema:
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
