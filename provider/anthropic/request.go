package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/adapter"
	"github.com/llmclient/llmclient/internal/jsonx"
)

// wireRequest is the Messages API request body (CreateMessageParams).
type wireRequest struct {
	Model         string          `json:"model"`
	MaxTokens     int             `json:"max_tokens"`
	System        any             `json:"system,omitempty"`
	Messages      []wireMessage   `json:"messages"`
	Tools         []wireTool      `json:"tools,omitempty"`
	ToolChoice    *wireToolChoice `json:"tool_choice,omitempty"`
	Temperature   *float64        `json:"temperature,omitempty"`
	TopP          *float64        `json:"top_p,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	OutputConfig  *wireOutput     `json:"output_config,omitempty"`
	Stream        bool            `json:"stream,omitempty"`
}

type wireMessage struct {
	Role    string      `json:"role"`
	Content []wireBlock `json:"content"`
}

// wireBlock is a request content block: text, image, tool_use or tool_result.
type wireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Source    *wireSource     `json:"source,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   any             `json:"content,omitempty"`
}

type wireSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

type wireTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
	Strict      bool            `json:"strict,omitempty"`
}

type wireToolChoice struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
}

type wireOutput struct {
	Format *wireFormat `json:"format,omitempty"`
}

type wireFormat struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
}

// emptySchema is the input schema of a tool without parameters.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// emptyObject is the input of a tool call without arguments.
var emptyObject = json.RawMessage(`{}`)

// buildBody encodes req as a Messages API request body for model.
func buildBody(req *llmclient.Request, model string, defaultMaxTokens int, stream bool) ([]byte, error) {
	if req == nil {
		return nil, errors.New("anthropic: nil request")
	}
	if model == "" {
		model = req.Model
	}
	if model == "" {
		return nil, errors.New("anthropic: no model")
	}
	w := wireRequest{
		Model:         model,
		MaxTokens:     req.MaxTokens,
		Temperature:   req.Temperature,
		TopP:          req.TopP,
		StopSequences: req.Stop,
		Stream:        stream,
	}
	if w.MaxTokens <= 0 {
		w.MaxTokens = defaultMaxTokens
	}
	system, msgs, err := convertMessages(req.Messages)
	if err != nil {
		return nil, err
	}
	w.System, w.Messages = system, msgs
	if w.Tools, err = convertTools(req.Tools); err != nil {
		return nil, err
	}
	if w.ToolChoice, err = convertToolChoice(req.ToolChoice); err != nil {
		return nil, err
	}
	if f := req.ResponseFormat; f != nil && f.Type == llmclient.FormatJSONSchema {
		if len(f.Schema) == 0 || !json.Valid(f.Schema) {
			return nil, errors.New("anthropic: response format json_schema needs a valid JSON schema")
		}
		w.OutputConfig = &wireOutput{Format: &wireFormat{Type: "json_schema", Schema: f.Schema}}
	}
	body, err := json.Marshal(&w)
	if err != nil {
		return nil, fmt.Errorf("anthropic: encode request: %w", err)
	}
	if body, err = jsonx.MergeExtra(body, req.Extra); err != nil {
		return nil, fmt.Errorf("anthropic: %w", err)
	}
	return body, nil
}

// convertMessages splits the system prompt off and turns the rest into alternating turns.
// Tool results become tool_result blocks of a user turn; consecutive messages that map to
// the same role are merged into one turn, as the API expects.
func convertMessages(in []llmclient.Message) (system any, out []wireMessage, err error) {
	var sys []wireBlock
	out = make([]wireMessage, 0, len(in))
	for i := range in {
		m := &in[i]
		var role string
		var blocks []wireBlock
		switch m.Role {
		case llmclient.RoleSystem:
			for _, p := range m.Content {
				if p.Type != llmclient.PartText {
					return nil, nil, fmt.Errorf("anthropic: message %d: system messages take text only", i)
				}
				if p.Text != "" {
					sys = append(sys, wireBlock{Type: "text", Text: p.Text})
				}
			}
			continue
		case llmclient.RoleUser:
			role = "user"
			if blocks, err = contentBlocks(m.Content, nil); err != nil {
				return nil, nil, fmt.Errorf("anthropic: message %d: %w", i, err)
			}
		case llmclient.RoleAssistant:
			role = "assistant"
			if blocks, err = contentBlocks(m.Content, nil); err != nil {
				return nil, nil, fmt.Errorf("anthropic: message %d: %w", i, err)
			}
			for _, tc := range m.ToolCalls {
				input := emptyObject
				if s := strings.TrimSpace(tc.Arguments); s != "" {
					if !json.Valid([]byte(s)) || s[0] != '{' {
						return nil, nil, fmt.Errorf("anthropic: message %d: tool call %q: arguments are not a JSON object", i, tc.ID)
					}
					input = json.RawMessage(s)
				}
				blocks = append(blocks, wireBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: input})
			}
		case llmclient.RoleTool:
			role = "user"
			if m.ToolCallID == "" {
				return nil, nil, fmt.Errorf("anthropic: message %d: tool result without ToolCallID", i)
			}
			b := wireBlock{Type: "tool_result", ToolUseID: m.ToolCallID}
			if b.Content, err = toolResultContent(m.Content); err != nil {
				return nil, nil, fmt.Errorf("anthropic: message %d: %w", i, err)
			}
			blocks = []wireBlock{b}
		default:
			return nil, nil, fmt.Errorf("anthropic: message %d: unknown role %q", i, m.Role)
		}
		if len(blocks) == 0 {
			continue // an empty turn carries nothing; the API rejects empty content
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			continue
		}
		out = append(out, wireMessage{Role: role, Content: blocks})
	}
	switch len(sys) {
	case 0:
		return nil, out, nil
	case 1:
		return sys[0].Text, out, nil
	}
	return sys, out, nil
}

// contentBlocks converts text and image parts, skipping empty text (the API rejects empty
// text blocks).
func contentBlocks(parts []llmclient.Part, dst []wireBlock) ([]wireBlock, error) {
	for _, p := range parts {
		switch p.Type {
		case llmclient.PartText:
			if p.Text != "" {
				dst = append(dst, wireBlock{Type: "text", Text: p.Text})
			}
		case llmclient.PartImage:
			src, err := imageSource(p)
			if err != nil {
				return nil, err
			}
			dst = append(dst, wireBlock{Type: "image", Source: src})
		default:
			return nil, fmt.Errorf("unknown part type %d", p.Type)
		}
	}
	return dst, nil
}

// toolResultContent is a tool result's content: a string when it is all text, else blocks.
func toolResultContent(parts []llmclient.Part) (any, error) {
	text := true
	for _, p := range parts {
		if p.Type != llmclient.PartText {
			text = false
			break
		}
	}
	if text {
		return llmclient.Message{Content: parts}.Text(), nil
	}
	return contentBlocks(parts, nil)
}

// imageSource encodes an image part: a data: URL or bytes become a base64 source, an
// http(s) URL a url source.
func imageSource(p llmclient.Part) (*wireSource, error) {
	mt, data, inline, err := adapter.InlineImage(p)
	switch {
	case err != nil:
		return nil, err
	case inline:
		return &wireSource{Type: "base64", MediaType: mt, Data: data}, nil
	}
	return &wireSource{Type: "url", URL: p.ImageURL}, nil
}

func convertTools(tools []llmclient.Tool) ([]wireTool, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	out := make([]wireTool, len(tools))
	for i, t := range tools {
		if t.Name == "" {
			return nil, fmt.Errorf("anthropic: tool %d has no name", i)
		}
		schema := emptySchema
		if len(t.Parameters) > 0 {
			if !json.Valid(t.Parameters) {
				return nil, fmt.Errorf("anthropic: tool %q: parameters are not valid JSON", t.Name)
			}
			schema = t.Parameters
		}
		out[i] = wireTool{Name: t.Name, Description: t.Description, InputSchema: schema, Strict: t.Strict}
	}
	return out, nil
}

func convertToolChoice(tc *llmclient.ToolChoice) (*wireToolChoice, error) {
	if tc == nil {
		return nil, nil
	}
	switch tc.Mode {
	case llmclient.ToolChoiceAuto, "":
		return &wireToolChoice{Type: "auto"}, nil
	case llmclient.ToolChoiceNone:
		return &wireToolChoice{Type: "none"}, nil
	case llmclient.ToolChoiceRequired:
		return &wireToolChoice{Type: "any"}, nil
	case llmclient.ToolChoiceTool:
		if tc.Name == "" {
			return nil, errors.New("anthropic: tool choice \"tool\" needs a tool name")
		}
		return &wireToolChoice{Type: "tool", Name: tc.Name}, nil
	}
	return nil, fmt.Errorf("anthropic: unknown tool choice mode %q", tc.Mode)
}
