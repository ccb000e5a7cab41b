package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/format"
	"github.com/llmclient/llmclient/internal/adapter"
)

// WithResponsesAPI makes Complete and Stream use OpenAI's Responses API (POST
// /responses; on Azure, {endpoint}/openai/responses) instead of Chat Completions, as
// OpenAI recommends for its reasoning models. Default: Chat Completions. Embed and the
// transport are not affected. See the package documentation for the translation.
func WithResponsesAPI() Option {
	return optionFunc(func(c *config) { c.responses = true })
}

// maxCallID is FunctionCallOutputItemParam.call_id's maxLength; longer ids from other
// vendors are shortened with adapter.CapID.
const maxCallID = 64

// The CreateResponse request body. Field order is the order on the wire.
type respBody struct {
	Model             string         `json:"model,omitempty"`
	Instructions      string         `json:"instructions,omitempty"`
	Input             []any          `json:"input"`
	Tools             []respTool     `json:"tools,omitempty"`
	ToolChoice        any            `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool          `json:"parallel_tool_calls,omitempty"`
	MaxOutputTokens   int            `json:"max_output_tokens,omitempty"`
	Temperature       *float64       `json:"temperature,omitempty"`
	TopP              *float64       `json:"top_p,omitempty"`
	Text              *respText      `json:"text,omitempty"`
	Reasoning         *respReasoning `json:"reasoning,omitempty"`
	Stream            bool           `json:"stream,omitempty"`
	PromptCacheKey    string         `json:"prompt_cache_key,omitempty"`
}

// respMessage is EasyInputMessage: content is a string or a list of input parts.
type respMessage struct {
	Type    string `json:"type"`
	Role    string `json:"role"`
	Content any    `json:"content"`
}

// respPart is InputTextContent or InputImageContent.
type respPart struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

type respFunctionCall struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type respFunctionOutput struct {
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	Output any    `json:"output"`
}

// respTool is FunctionTool: strict and parameters are required (parameters may be null).
type respTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

type respText struct {
	Format respFormat `json:"format"`
}

type respFormat struct {
	Type   string          `json:"type"`
	Name   string          `json:"name,omitempty"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict bool            `json:"strict,omitempty"`
}

type respReasoning struct {
	Effort string `json:"effort,omitempty"`
}

// buildResponsesBody encodes req as a CreateResponse body for model, recording how it
// translated the request in notes. Leading system messages become instructions, later
// ones system messages of the input; user and assistant messages become messages, tool
// calls function_call items and tool results function_call_output items (which take
// images). Request.Extra is merged into the top level ("stream" excepted), and a string
// Extra["reasoning_effort"] (the Chat Completions name) becomes reasoning.effort.
func buildResponsesBody(req *llmclient.Request, model string, stream bool, notes *adapter.Notes) ([]byte, error) {
	if len(req.Messages) == 0 {
		return nil, errors.New("openai: request has no messages")
	}
	if req.MaxTokens < 0 {
		return nil, errors.New("openai: MaxTokens is negative")
	}
	if n := utf8.RuneCountInString(req.PromptCacheKey); n > maxPromptCacheKey {
		return nil, fmt.Errorf("openai: PromptCacheKey is %d characters; the Responses API takes at most %d", n, maxPromptCacheKey)
	}
	if len(req.Stop) > 0 {
		return nil, adapter.Unsupported("openai", model, "the Responses API has no stop sequences")
	}
	body := respBody{Model: model, MaxOutputTokens: req.MaxTokens, Stream: stream, Input: []any{},
		PromptCacheKey: req.PromptCacheKey}
	var err error
	if body.Temperature, err = adapter.Clamp(notes, "temperature", req.Temperature, 0, maxTemperature); err != nil {
		return nil, errors.New("openai: " + err.Error())
	}
	if body.TopP, err = adapter.Clamp(notes, "top_p", req.TopP, 0, maxTopP); err != nil {
		return nil, errors.New("openai: " + err.Error())
	}
	if err := responsesInput(&body, req.Messages, model, notes); err != nil {
		return nil, err
	}
	noteToolErrors(req.Messages, notes)
	for i, t := range req.Tools {
		if t.Name == "" {
			return nil, errors.New("openai: tool " + strconv.Itoa(i) + ": name is empty")
		}
		params := t.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		body.Tools = append(body.Tools, respTool{Type: "function", Name: t.Name, Description: t.Description, Parameters: params, Strict: t.Strict})
	}
	if body.ToolChoice, err = responsesToolChoice(req.ToolChoice); err != nil {
		return nil, err
	}
	body.ParallelToolCalls = parallelToolCalls(req)
	if body.Text, err = responsesFormat(req.ResponseFormat); err != nil {
		return nil, err
	}
	extra := req.Extra
	if effort, ok := extra["reasoning_effort"].(string); ok {
		body.Reasoning = &respReasoning{Effort: effort}
		extra = make(map[string]any, len(req.Extra))
		for k, v := range req.Extra {
			if k != "reasoning_effort" {
				extra[k] = v
			}
		}
	}
	b, err := marshal(&body)
	if err != nil {
		return nil, errors.New("openai: encoding request: " + err.Error())
	}
	if len(extra) == 0 {
		return b, nil
	}
	return mergeExtra(b, extra)
}

// responsesInput fills instructions and input from the conversation.
func responsesInput(body *respBody, msgs []llmclient.Message, model string, notes *adapter.Notes) error {
	var instructions []string
	leading := true
	for i := range msgs {
		m := &msgs[i]
		if m.Role != llmclient.RoleSystem {
			leading = false
		}
		fail := func(err error) error { return errors.New("openai: message " + strconv.Itoa(i) + ": " + err.Error()) }
		switch m.Role {
		case llmclient.RoleSystem:
			text, images := splitImages(m.Content)
			t := llmclient.Message{Content: text}.Text()
			switch {
			case leading && t != "":
				instructions = append(instructions, t)
			case t != "":
				body.Input = append(body.Input, respMessage{Type: "message", Role: "system", Content: t})
			}
			if len(images) > 0 {
				parts, err := responsesParts(images)
				if err != nil {
					return fail(err)
				}
				notes.Add("message %d: %d image(s) of a system message moved to a user message (system messages take text only)", i, len(images))
				body.Input = append(body.Input, respMessage{Type: "message", Role: "user", Content: parts})
			}
		case llmclient.RoleUser:
			if len(m.Content) == 1 && m.Content[0].Type == llmclient.PartText {
				body.Input = append(body.Input, respMessage{Type: "message", Role: "user", Content: m.Content[0].Text})
				continue
			}
			parts, err := responsesParts(m.Content)
			if err != nil {
				return fail(err)
			}
			if len(parts) > 0 {
				body.Input = append(body.Input, respMessage{Type: "message", Role: "user", Content: parts})
			}
		case llmclient.RoleAssistant:
			text, images := splitImages(m.Content)
			if len(images) > 0 {
				return adapter.Unsupported("openai", model, "message "+strconv.Itoa(i)+
					": an assistant message with an image (the Responses API takes only text in assistant messages)")
			}
			if t := (llmclient.Message{Content: text}).Text(); t != "" {
				body.Input = append(body.Input, respMessage{Type: "message", Role: "assistant", Content: t})
			}
			for _, tc := range m.ToolCalls {
				if tc.Name == "" {
					return fail(errors.New("tool call " + strconv.Quote(tc.ID) + " has no name"))
				}
				args := tc.Arguments
				if args == "" {
					args = "{}"
				}
				body.Input = append(body.Input, respFunctionCall{Type: "function_call", CallID: callID(tc.ID, notes), Name: tc.Name, Arguments: args})
			}
		case llmclient.RoleTool:
			if m.ToolCallID == "" {
				return fail(errors.New("tool message without ToolCallID"))
			}
			out := respFunctionOutput{Type: "function_call_output", CallID: callID(m.ToolCallID, notes)}
			if _, images := splitImages(m.Content); len(images) == 0 {
				out.Output = m.Text()
			} else {
				parts, err := responsesParts(m.Content)
				if err != nil {
					return fail(err)
				}
				out.Output = parts
			}
			body.Input = append(body.Input, out)
		case "":
			return fail(errors.New("role is empty"))
		default:
			return fail(errors.New("unknown role " + strconv.Quote(string(m.Role))))
		}
	}
	body.Instructions = strings.Join(instructions, "\n\n")
	return nil
}

// callID returns the call_id sent for id (see maxCallID), with a note when it differs.
func callID(id string, notes *adapter.Notes) string {
	w := adapter.CapID(id, maxCallID)
	if w != id {
		notes.Add("tool call id %q sent as %q (the Responses API takes call ids of at most %d characters)", id, w, maxCallID)
	}
	return w
}

// responsesParts converts text and image parts to input_text and input_image parts,
// skipping empty text. Images need a detail; "auto" when the part has none.
func responsesParts(parts []llmclient.Part) ([]respPart, error) {
	out := make([]respPart, 0, len(parts))
	for i := range parts {
		p := &parts[i]
		switch p.Type {
		case llmclient.PartText:
			if p.Text != "" {
				out = append(out, respPart{Type: "input_text", Text: p.Text})
			}
		case llmclient.PartImage:
			u := p.ImageURL
			if u == "" {
				if len(p.ImageData) == 0 {
					return nil, errors.New("part " + strconv.Itoa(i) + ": image part has neither ImageURL nor ImageData")
				}
				u = dataURL(p.MIMEType, p.ImageData)
			}
			detail := p.Detail
			if detail == "" {
				detail = "auto"
			}
			out = append(out, respPart{Type: "input_image", ImageURL: u, Detail: detail})
		default:
			return nil, errors.New("part " + strconv.Itoa(i) + ": unknown part type " + strconv.Itoa(int(p.Type)))
		}
	}
	return out, nil
}

func responsesToolChoice(tc *llmclient.ToolChoice) (any, error) {
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
		return map[string]string{"type": "function", "name": tc.Name}, nil
	}
	return nil, errors.New("openai: unknown tool choice mode " + strconv.Quote(string(tc.Mode)))
}

func responsesFormat(rf *llmclient.ResponseFormat) (*respText, error) {
	if rf == nil {
		return nil, nil
	}
	switch rf.Type {
	case "":
		return nil, nil
	case format.Text, format.JSONObject:
		return &respText{Format: respFormat{Type: string(rf.Type)}}, nil
	case format.JSONSchema:
		if len(rf.Schema) == 0 {
			return nil, errors.New("openai: response format json_schema needs a Schema")
		}
		name := rf.Name
		if name == "" {
			name = defaultSchemaName
		}
		return &respText{Format: respFormat{Type: "json_schema", Name: name, Schema: rf.Schema, Strict: rf.Strict}}, nil
	}
	return nil, errors.New("openai: unknown response format " + strconv.Quote(string(rf.Type)))
}
