package openai

import (
	"bytes"
	"encoding/json"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/format"
)

// The request bodies, read leniently: only what the transport needs to route a call and
// estimate its tokens. A field of an unexpected type leaves the rest readable.

type inChat struct {
	Model               string      `json:"model"`
	Stream              bool        `json:"stream"`
	MaxTokens           int         `json:"max_tokens"`
	MaxCompletionTokens int         `json:"max_completion_tokens"`
	PromptCacheKey      string      `json:"prompt_cache_key"`
	Messages            []inMessage `json:"messages"`
	Tools               []struct {
		Function inFunction `json:"function"`
	} `json:"tools"`
	ResponseFormat *struct {
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

type inMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

type inFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// inPart is a content part of either API: text, images, audio and files.
type inPart struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	Refusal string `json:"refusal"`
	Detail  string `json:"detail"`
	// ImageURL is {"url","detail"} in Chat Completions, a plain URL in the Responses API.
	ImageURL json.RawMessage `json:"image_url"`
}

func inspectChat(body []byte, call *llmclient.APICall, msgs []llmclient.Message, parts []llmclient.Part) {
	if scanChatInto(body, call, msgs, parts) {
		return
	}
	call.Stream, call.Request = false, llmclient.Request{}
	decodeChat(body, call)
}

// decodeChat is inspectChat with encoding/json, lenient about fields of unexpected types:
// the fallback for bodies the scanner does not take.
func decodeChat(body []byte, call *llmclient.APICall) {
	var b inChat
	if len(body) == 0 || json.Unmarshal(body, &b) != nil {
		lenient(body, &b)
	}
	req := &call.Request
	req.Model, req.PromptCacheKey = b.Model, b.PromptCacheKey
	call.Stream = b.Stream
	req.MaxTokens = b.MaxCompletionTokens
	if req.MaxTokens == 0 {
		req.MaxTokens = b.MaxTokens
	}
	for i := range b.Messages {
		m := &b.Messages[i]
		msg := llmclient.Message{Role: role(m.Role), Name: m.Name, ToolCallID: m.ToolCallID, Content: parts(m.Content)}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, llmclient.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		req.Messages = append(req.Messages, msg)
	}
	for _, t := range b.Tools {
		req.Tools = append(req.Tools, tool(t.Function))
	}
	if rf := b.ResponseFormat; rf != nil && rf.JSONSchema != nil && len(rf.JSONSchema.Schema) > 0 {
		req.ResponseFormat = &llmclient.ResponseFormat{Type: format.JSONSchema, Name: rf.JSONSchema.Name, Schema: rf.JSONSchema.Schema}
	}
}

type inResponses struct {
	Model           string          `json:"model"`
	Stream          bool            `json:"stream"`
	MaxOutputTokens int             `json:"max_output_tokens"`
	PromptCacheKey  string          `json:"prompt_cache_key"`
	Instructions    string          `json:"instructions"`
	Input           json.RawMessage `json:"input"`
	Tools           []inFunction    `json:"tools"` // function fields sit at the top level
	Text            *struct {
		Format *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"text"`
}

type inItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

func inspectResponses(body []byte, call *llmclient.APICall) {
	var b inResponses
	if len(body) == 0 || json.Unmarshal(body, &b) != nil {
		lenient(body, &b)
	}
	req := &call.Request
	req.Model, req.PromptCacheKey = b.Model, b.PromptCacheKey
	call.Stream = b.Stream
	req.MaxTokens = b.MaxOutputTokens
	if b.Instructions != "" {
		req.Messages = append(req.Messages, llmclient.SystemMessage(b.Instructions))
	}
	in := bytes.TrimSpace(b.Input)
	switch {
	case len(in) > 0 && in[0] == '"':
		var s string
		_ = json.Unmarshal(in, &s)
		req.Messages = append(req.Messages, llmclient.UserMessage(s))
	case len(in) > 0 && in[0] == '[':
		var items []inItem
		_ = json.Unmarshal(in, &items)
		for i := range items {
			req.Messages = appendItem(req.Messages, &items[i])
		}
	}
	for _, t := range b.Tools {
		if t.Name != "" {
			req.Tools = append(req.Tools, tool(t))
		}
	}
	if t := b.Text; t != nil && t.Format != nil && len(t.Format.Schema) > 0 {
		req.ResponseFormat = &llmclient.ResponseFormat{Type: format.JSONSchema, Name: t.Format.Name, Schema: t.Format.Schema}
	}
}

// appendItem adds one Responses API input item: a message, a function call or its output.
func appendItem(msgs []llmclient.Message, it *inItem) []llmclient.Message {
	switch it.Type {
	case "", "message":
		return append(msgs, llmclient.Message{Role: role(it.Role), Content: parts(it.Content)})
	case "function_call", "custom_tool_call":
		return append(msgs, llmclient.Message{Role: llmclient.RoleAssistant,
			ToolCalls: []llmclient.ToolCall{{ID: it.CallID, Name: it.Name, Arguments: it.Arguments}}})
	case "function_call_output", "custom_tool_call_output":
		return append(msgs, llmclient.Message{Role: llmclient.RoleTool, ToolCallID: it.CallID, Content: parts(it.Output)})
	}
	return msgs
}

type inEmbeddings struct {
	Model string          `json:"model"`
	Input json.RawMessage `json:"input"`
}

// inspectEmbeddings reads the inputs: a string, strings, token ids or lists of token ids.
func inspectEmbeddings(body []byte, call *llmclient.APICall) {
	var b inEmbeddings
	if len(body) == 0 || json.Unmarshal(body, &b) != nil {
		lenient(body, &b)
	}
	call.Request.Model = b.Model
	in := bytes.TrimSpace(b.Input)
	if len(in) == 0 {
		return
	}
	if in[0] == '"' {
		var s string
		_ = json.Unmarshal(in, &s)
		call.Request.Messages = []llmclient.Message{llmclient.UserMessage(s)}
		return
	}
	var list []json.RawMessage
	if json.Unmarshal(in, &list) != nil {
		return
	}
	for _, item := range list {
		item = bytes.TrimSpace(item)
		switch {
		case len(item) == 0:
		case item[0] == '"':
			var s string
			_ = json.Unmarshal(item, &s)
			call.Request.Messages = append(call.Request.Messages, llmclient.UserMessage(s))
		case item[0] == '[':
			var ids []json.RawMessage
			_ = json.Unmarshal(item, &ids)
			call.TokenIDs += len(ids)
		default:
			call.TokenIDs++ // one token id of a flat list
		}
	}
}

// lenient decodes what it can of a body whose strict decoding failed: each top-level field
// on its own, so one field of an unexpected type does not hide the others.
func lenient(body []byte, v any) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return
	}
	for k, raw := range fields {
		one, err := json.Marshal(map[string]json.RawMessage{k: raw})
		if err == nil {
			_ = json.Unmarshal(one, v)
		}
	}
}

// parts reads message content: a string, or an array of parts.
func parts(raw json.RawMessage) []llmclient.Part {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		return []llmclient.Part{llmclient.TextPart(s)}
	}
	var ps []inPart
	if raw[0] != '[' || json.Unmarshal(raw, &ps) != nil {
		return nil
	}
	out := make([]llmclient.Part, 0, len(ps))
	for i := range ps {
		p := &ps[i]
		switch p.Type {
		case "image_url", "input_image":
			detail := p.Detail
			var u struct {
				Detail string `json:"detail"`
			}
			if len(p.ImageURL) > 0 && p.ImageURL[0] == '{' && json.Unmarshal(p.ImageURL, &u) == nil && u.Detail != "" {
				detail = u.Detail
			}
			out = append(out, llmclient.Part{Type: llmclient.PartImage, Detail: detail})
		case "input_audio", "file", "input_file":
			out = append(out, llmclient.Part{Type: llmclient.PartImage})
		default:
			if p.Text != "" {
				out = append(out, llmclient.TextPart(p.Text))
			} else if p.Refusal != "" {
				out = append(out, llmclient.TextPart(p.Refusal))
			}
		}
	}
	return out
}

func role(r string) llmclient.Role {
	switch r {
	case "system", "developer":
		return llmclient.RoleSystem
	case "assistant":
		return llmclient.RoleAssistant
	case "tool", "function":
		return llmclient.RoleTool
	}
	return llmclient.RoleUser
}

func tool(f inFunction) llmclient.Tool {
	return llmclient.Tool{Name: f.Name, Description: f.Description, Parameters: f.Parameters}
}
