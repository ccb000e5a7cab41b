package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/format"
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
	IsError   bool            `json:"is_error,omitempty"`
	Cache     *wireCache      `json:"cache_control,omitempty"`
}

// wireCache is CacheControlEphemeral.
type wireCache struct {
	Type string `json:"type"`
	TTL  string `json:"ttl,omitempty"`
}

// maxBreakpoints is the most cache_control blocks a request may carry.
const maxBreakpoints = 4

func cacheControl(c *llmclient.CacheControl) *wireCache {
	if c == nil {
		return nil
	}
	w := &wireCache{Type: "ephemeral"}
	switch c.TTL {
	case 0:
	case 5 * time.Minute:
		w.TTL = "5m"
	case time.Hour:
		w.TTL = "1h"
	default:
		w.TTL = c.TTL.String() // refused by checkTTLs
	}
	return w
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
	Cache       *wireCache      `json:"cache_control,omitempty"`
}

// wireToolChoice is ToolChoiceAuto, ToolChoiceAny, ToolChoiceTool or ToolChoiceNone
// (which has no disable_parallel_tool_use).
type wireToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
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

// The Messages API's sampling ranges: temperature and top_p in [0, 1]. Values outside
// are clamped, with a note.
const maxTemperature, maxTopP = 1, 1

// buildBody encodes req as a Messages API request body for model, recording how it
// translated the request in notes.
func buildBody(req *llmclient.Request, model string, defaultMaxTokens int, stream bool, notes *adapter.Notes) ([]byte, error) {
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
		StopSequences: req.Stop,
		Stream:        stream,
	}
	switch {
	case w.MaxTokens < 0:
		return nil, errors.New("anthropic: MaxTokens is negative")
	case w.MaxTokens == 0:
		w.MaxTokens = defaultMaxTokens
	}
	var err error
	if w.Temperature, err = adapter.Clamp(notes, "temperature", req.Temperature, 0, maxTemperature); err != nil {
		return nil, errors.New("anthropic: " + err.Error())
	}
	if w.TopP, err = adapter.Clamp(notes, "top_p", req.TopP, 0, maxTopP); err != nil {
		return nil, errors.New("anthropic: " + err.Error())
	}
	system, msgs, err := convertMessages(req.Messages, notes)
	if err != nil {
		return nil, err
	}
	w.System, w.Messages = system, msgs
	if w.Tools, err = convertTools(req.Tools); err != nil {
		return nil, err
	}
	if err := checkTTLs(&w); err != nil {
		return nil, err
	}
	limitBreakpoints(&w, notes)
	if w.ToolChoice, err = convertToolChoice(req.ToolChoice); err != nil {
		return nil, err
	}
	if req.DisableParallelToolCalls && len(w.Tools) > 0 {
		if w.ToolChoice == nil {
			w.ToolChoice = &wireToolChoice{Type: "auto"}
		}
		if w.ToolChoice.Type != "none" {
			w.ToolChoice.DisableParallelToolUse = true
		}
	}
	if f := req.ResponseFormat; f != nil {
		switch f.Type {
		case format.JSONSchema:
			if len(f.Schema) == 0 || !json.Valid(f.Schema) {
				return nil, errors.New("anthropic: response format json_schema needs a valid JSON schema")
			}
			w.OutputConfig = &wireOutput{Format: &wireFormat{Type: "json_schema", Schema: f.Schema}}
		case format.JSONObject:
			notes.Add("response format json_object not sent: the Messages API has no JSON mode (only json_schema has an equivalent, output_config.format)")
		}
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
// the same role are merged into one turn, as the API expects. Images in a system message
// move to a user turn at the same place (the system prompt takes text only). Tool-call ids
// are mapped to the API's pattern (see toolIDs).
func convertMessages(in []llmclient.Message, notes *adapter.Notes) (system any, out []wireMessage, err error) {
	var sys []wireBlock
	ids := newToolIDs(notes)
	out = make([]wireMessage, 0, len(in))
	for i := range in {
		m := &in[i]
		var role string
		var blocks []wireBlock
		switch m.Role {
		case llmclient.RoleSystem:
			var images []llmclient.Part
			for _, p := range m.Content {
				switch {
				case p.Type == llmclient.PartImage:
					images = append(images, p)
				case p.Type != llmclient.PartText:
					return nil, nil, fmt.Errorf("anthropic: message %d: unknown part type %d", i, p.Type)
				case p.Text != "":
					sys = append(sys, wireBlock{Type: "text", Text: p.Text, Cache: cacheControl(p.Cache)})
				}
			}
			if m.Cache != nil && len(sys) > 0 {
				sys[len(sys)-1].Cache = cacheControl(m.Cache)
			}
			if len(images) == 0 {
				continue
			}
			notes.Add("message %d: %d image(s) of the system prompt moved to a user turn (the system prompt takes text only)", i, len(images))
			role = "user"
			if blocks, err = contentBlocks(images, nil); err != nil {
				return nil, nil, fmt.Errorf("anthropic: message %d: %w", i, err)
			}
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
			if n := len(out); n == 0 || out[n-1].Role != "assistant" {
				ids.turn()
			}
			for _, tc := range m.ToolCalls {
				input := emptyObject
				if s := strings.TrimSpace(tc.Arguments); s != "" {
					if !json.Valid([]byte(s)) || s[0] != '{' {
						return nil, nil, fmt.Errorf("anthropic: message %d: tool call %q: arguments are not a JSON object", i, tc.ID)
					}
					input = json.RawMessage(s)
				}
				blocks = append(blocks, wireBlock{Type: "tool_use", ID: ids.call(tc.ID), Name: tc.Name, Input: input})
			}
		case llmclient.RoleTool:
			role = "user"
			if m.ToolCallID == "" {
				return nil, nil, fmt.Errorf("anthropic: message %d: tool result without ToolCallID", i)
			}
			b := wireBlock{Type: "tool_result", ToolUseID: ids.result(m.ToolCallID), IsError: m.IsError}
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
		if m.Cache != nil {
			blocks[len(blocks)-1].Cache = cacheControl(m.Cache)
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			continue
		}
		out = append(out, wireMessage{Role: role, Content: blocks})
	}
	switch {
	case len(sys) == 0:
		return nil, out, nil
	case len(sys) == 1 && sys[0].Cache == nil:
		return sys[0].Text, out, nil
	}
	return sys, out, nil
}

// toolIDs maps the caller's tool-call ids to the API's: tool_use.id and
// tool_result.tool_use_id must match ^[a-zA-Z0-9_-]+$, so another vendor's id that does
// not (Gemini's signed "call_0__thought__…", "functions.get_weather:0") is encoded with
// adapter.PatternID; and tool_use ids must be unique in a request, so an id that repeats
// an earlier turn's (Gemini numbers its made-up ids per response) gets a "_<n>" suffix.
// A tool result takes the wire id of the latest call with its id. The mapping depends only
// on the messages before, so every request of a growing conversation maps its earlier
// turns the same way.
type toolIDs struct {
	current map[string]string // caller id -> wire id of the latest call with that id
	used    map[string]bool
	notes   *adapter.Notes
}

func newToolIDs(notes *adapter.Notes) *toolIDs {
	return &toolIDs{current: map[string]string{}, used: map[string]bool{}, notes: notes}
}

// turn starts an assistant turn: earlier calls can no longer be answered.
func (t *toolIDs) turn() { clear(t.current) }

func (t *toolIDs) call(id string) string {
	w := adapter.PatternID(id)
	if w != id {
		t.notes.Add("tool call id %q sent as %q (Anthropic ids match ^[a-zA-Z0-9_-]+$)", id, w)
	}
	if base := w; t.used[w] {
		for k := 2; t.used[w]; k++ {
			w = base + "_" + strconv.Itoa(k)
		}
		t.notes.Add("tool call id %q repeats an earlier turn's; sent as %q (tool_use ids must be unique)", id, w)
	}
	t.used[w] = true
	t.current[id] = w
	return w
}

func (t *toolIDs) result(id string) string {
	if w, ok := t.current[id]; ok {
		return w
	}
	w := adapter.PatternID(id)
	if w != id {
		t.notes.Add("tool call id %q sent as %q (Anthropic ids match ^[a-zA-Z0-9_-]+$)", id, w)
	}
	return w
}

// checkTTLs refuses a cache TTL the API does not know: it takes "5m" and "1h".
func checkTTLs(w *wireRequest) error {
	bad := func(c *wireCache) bool { return c != nil && c.TTL != "" && c.TTL != "5m" && c.TTL != "1h" }
	for i := range w.Tools {
		if bad(w.Tools[i].Cache) {
			return fmt.Errorf("anthropic: tool %d: cache TTL %q is not 5m or 1h", i, w.Tools[i].Cache.TTL)
		}
	}
	if sys, ok := w.System.([]wireBlock); ok {
		for i := range sys {
			if bad(sys[i].Cache) {
				return fmt.Errorf("anthropic: system prompt: cache TTL %q is not 5m or 1h", sys[i].Cache.TTL)
			}
		}
	}
	for i := range w.Messages {
		for j := range w.Messages[i].Content {
			if c := w.Messages[i].Content[j].Cache; bad(c) {
				return fmt.Errorf("anthropic: message turn %d: cache TTL %q is not 5m or 1h", i, c.TTL)
			}
		}
	}
	return nil
}

// limitBreakpoints keeps at most maxBreakpoints cache_control marks, dropping the
// earliest (tools, then system, then messages, in prompt order), with a note: a later
// breakpoint caches a longer prefix.
func limitBreakpoints(w *wireRequest, notes *adapter.Notes) {
	var marks []**wireCache
	for i := range w.Tools {
		if w.Tools[i].Cache != nil {
			marks = append(marks, &w.Tools[i].Cache)
		}
	}
	if sys, ok := w.System.([]wireBlock); ok {
		for i := range sys {
			if sys[i].Cache != nil {
				marks = append(marks, &sys[i].Cache)
			}
		}
	}
	for i := range w.Messages {
		for j := range w.Messages[i].Content {
			if w.Messages[i].Content[j].Cache != nil {
				marks = append(marks, &w.Messages[i].Content[j].Cache)
			}
		}
	}
	if n := len(marks) - maxBreakpoints; n > 0 {
		for _, m := range marks[:n] {
			*m = nil
		}
		notes.Add("%d cache breakpoints; the first %d dropped (at most %d per request)", len(marks), n, maxBreakpoints)
	}
}

// contentBlocks converts text and image parts, skipping empty text (the API rejects empty
// text blocks).
func contentBlocks(parts []llmclient.Part, dst []wireBlock) ([]wireBlock, error) {
	for _, p := range parts {
		switch p.Type {
		case llmclient.PartText:
			if p.Text != "" {
				dst = append(dst, wireBlock{Type: "text", Text: p.Text, Cache: cacheControl(p.Cache)})
			}
		case llmclient.PartImage:
			src, err := imageSource(p)
			if err != nil {
				return nil, err
			}
			dst = append(dst, wireBlock{Type: "image", Source: src, Cache: cacheControl(p.Cache)})
		default:
			return nil, fmt.Errorf("unknown part type %d", p.Type)
		}
	}
	return dst, nil
}

// toolResultContent is a tool result's content: a string when it is all text without
// cache marks, else blocks.
func toolResultContent(parts []llmclient.Part) (any, error) {
	text := true
	for _, p := range parts {
		if p.Type != llmclient.PartText || p.Cache != nil {
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
		out[i] = wireTool{Name: t.Name, Description: t.Description, InputSchema: schema, Strict: t.Strict, Cache: cacheControl(t.Cache)}
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
