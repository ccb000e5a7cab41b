package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/estimate"
	"github.com/llmclient/llmclient/format"
	"github.com/llmclient/llmclient/internal/jsonx"
)

// TokenRatio is how many Claude tokens a text costs per o200k_base token, the encoding
// llmclient's estimators count in. Anthropic publishes no tokenizer; the value is the
// root package's assumption for "claude" models (published comparisons of Claude 3.5
// Sonnet with GPT-4o on the same inputs found 16% more tokens for English prose and 30%
// for code; 1.25 sits between them).
const TokenRatio = 1.25

// EstimateBodyTokens estimates the prompt tokens of a raw Messages API request body, as
// the transport sees it: the system prompt, every message's text, tool calls and tool
// results, fixed costs for images and documents, the tool definitions and the output
// schema, with llmclient.EstimatePromptTokens' framing, multiplied by TokenRatio (so
// callers must not apply a Claude ratio again). The output reservation (max_tokens) is not
// included. A nil est means estimate.Heuristic. It fails on a body that is not a
// JSON object. It is safe for concurrent use when est is.
func EstimateBodyTokens(body []byte, est estimate.Estimator) (int, error) {
	var w wireBody
	if !jsonx.IsObject(body) { // null and other values encoding/json takes for a struct
		return 0, errors.New("anthropic: estimate: request body is not a JSON object")
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return 0, fmt.Errorf("anthropic: estimate: request body: %w", err)
	}
	req := &llmclient.Request{Model: w.Model}
	w.addTo(req)
	n := llmclient.EstimatePromptTokens(est, req)
	return int(math.Ceil(float64(n) * TokenRatio)), nil
}

// wireBody is what EstimateBodyTokens and Inspect read of a Messages request body. Stream
// and MaxTokens are lenient (see jsonx.Int), so that an odd value fails no estimate.
type wireBody struct {
	Model     string          `json:"model"`
	Stream    jsonx.Bool      `json:"stream"`     // read by Inspect only
	MaxTokens jsonx.Int       `json:"max_tokens"` // read by Inspect only
	System    json.RawMessage `json:"system"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
	OutputConfig *struct {
		Format *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"output_config"`
}

// addTo appends the body's system prompt, messages and tools to req and sets its response
// format from output_config.format.
func (w *wireBody) addTo(req *llmclient.Request) {
	if sys := blocksOf(w.System); len(sys) > 0 {
		req.Messages = appendBlocks(req.Messages, llmclient.RoleSystem, sys)
	}
	for _, m := range w.Messages {
		role := llmclient.RoleUser
		if m.Role == "assistant" {
			role = llmclient.RoleAssistant
		}
		req.Messages = appendBlocks(req.Messages, role, blocksOf(m.Content))
	}
	for _, t := range w.Tools {
		req.Tools = append(req.Tools, llmclient.Tool{Name: t.Name, Description: t.Description, Parameters: jsonx.CompactRaw(t.InputSchema)})
	}
	if oc := w.OutputConfig; oc != nil && oc.Format != nil && len(oc.Format.Schema) > 0 {
		req.ResponseFormat = &llmclient.ResponseFormat{Type: format.JSONSchema, Schema: jsonx.CompactRaw(oc.Format.Schema)}
	}
}

// estBlock is any content block, read leniently for estimation.
type estBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

// blocksOf reads content that is a string or an array of blocks.
func blocksOf(raw json.RawMessage) []estBlock {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil
		}
		return []estBlock{{Type: "text", Text: s}}
	}
	var blocks []estBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return nil
	}
	return blocks
}

// appendBlocks appends one message of role with blocks' text, images and tool calls, and
// one tool message per tool_result block.
func appendBlocks(msgs []llmclient.Message, role llmclient.Role, blocks []estBlock) []llmclient.Message {
	m := llmclient.Message{Role: role}
	for _, b := range blocks {
		switch b.Type {
		case "text":
			m.Content = append(m.Content, llmclient.TextPart(b.Text))
		case "image", "document":
			m.Content = append(m.Content, llmclient.Part{Type: llmclient.PartImage})
		case "tool_use":
			m.ToolCalls = append(m.ToolCalls, llmclient.ToolCall{ID: b.ID, Name: b.Name, Arguments: jsonx.Compact(b.Input)})
		case "tool_result":
			tm := llmclient.Message{Role: llmclient.RoleTool, ToolCallID: b.ToolUseID}
			for _, c := range blocksOf(b.Content) {
				switch c.Type {
				case "text":
					tm.Content = append(tm.Content, llmclient.TextPart(c.Text))
				case "image", "document":
					tm.Content = append(tm.Content, llmclient.Part{Type: llmclient.PartImage})
				}
			}
			msgs = append(msgs, tm)
		}
	}
	if len(m.Content) > 0 || len(m.ToolCalls) > 0 {
		msgs = append(msgs, m)
	}
	return msgs
}
