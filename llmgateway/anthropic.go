package llmgateway

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/finish"
)

// The Anthropic Messages wire types the front door reads and writes.

type anRequest struct {
	Model         string          `json:"model"`
	MaxTokens     *int            `json:"max_tokens"`
	Messages      []anMessage     `json:"messages"`
	System        json.RawMessage `json:"system"`
	Tools         []anTool        `json:"tools"`
	ToolChoice    *anToolChoice   `json:"tool_choice"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	StopSequences []string        `json:"stop_sequences"`
	Stream        bool            `json:"stream"`
}

type anMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	Source       *anSource       `json:"source"`
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Input        json.RawMessage `json:"input"`
	ToolUseID    string          `json:"tool_use_id"`
	Content      json.RawMessage `json:"content"`
	IsError      bool            `json:"is_error"`
	CacheControl *anCache        `json:"cache_control"`
}

type anSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
}

type anCache struct {
	Type string `json:"type"`
	TTL  string `json:"ttl"`
}

type anTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *anCache        `json:"cache_control"`
}

type anToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

func (c *anCache) control() (*llmclient.CacheControl, error) {
	if c == nil {
		return nil, nil
	}
	out := &llmclient.CacheControl{}
	switch c.TTL {
	case "":
	case "5m":
		out.TTL = 5 * 60e9
	case "1h":
		out.TTL = 3600e9
	default:
		return nil, fmt.Errorf("cache_control.ttl %q is not 5m or 1h", c.TTL)
	}
	return out, nil
}

// blocks reads content that is a string or an array of blocks.
func blocks(raw json.RawMessage) ([]anBlock, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []anBlock{{Type: "text", Text: s}}, nil
	}
	var bs []anBlock
	if err := json.Unmarshal(raw, &bs); err != nil {
		return nil, fmt.Errorf("a string or an array of content blocks")
	}
	return bs, nil
}

func decodeAnthropic(body []byte) (*llmclient.Request, bool, error) {
	var in anRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, false, fmt.Errorf("the body is not a JSON messages request: %v", err)
	}
	if in.Model == "" {
		return nil, false, fmt.Errorf("model: Field required")
	}
	maxTokens := 0
	if in.MaxTokens != nil {
		// Anthropic takes 0 to warm the prompt cache without generating; the common
		// request reads 0 as the vendor's default, which would generate a whole answer.
		switch maxTokens = *in.MaxTokens; {
		case maxTokens < 0:
			return nil, false, &fieldError{param: "max_tokens", msg: "max_tokens: must not be negative"}
		case maxTokens == 0:
			return nil, false, &fieldError{param: "max_tokens", msg: "max_tokens: 0 (warming the prompt cache without an answer) is not supported by this gateway; it must be at least 1"}
		}
	}
	if len(in.Messages) == 0 {
		return nil, false, fmt.Errorf("messages: at least one message is required")
	}
	req := &llmclient.Request{Model: in.Model, MaxTokens: maxTokens, Temperature: in.Temperature, TopP: in.TopP, Stop: in.StopSequences}
	sys, err := blocks(in.System)
	if err != nil {
		return nil, false, fmt.Errorf("system: %v", err)
	}
	if len(sys) > 0 {
		m := llmclient.Message{Role: llmclient.RoleSystem}
		for i, b := range sys {
			if b.Type != "text" {
				return nil, false, fmt.Errorf("system[%d]: only text blocks", i)
			}
			p := llmclient.TextPart(b.Text)
			if p.Cache, err = b.CacheControl.control(); err != nil {
				return nil, false, fmt.Errorf("system[%d]: %v", i, err)
			}
			m.Content = append(m.Content, p)
		}
		req.Messages = append(req.Messages, m)
	}
	for i, m := range in.Messages {
		msgs, err := anMessages(m)
		if err != nil {
			return nil, false, fmt.Errorf("messages[%d]: %v", i, err)
		}
		req.Messages = append(req.Messages, msgs...)
	}
	for i, t := range in.Tools {
		if t.Name == "" {
			return nil, false, fmt.Errorf("tools[%d]: name: Field required", i)
		}
		tool := llmclient.Tool{Name: t.Name, Description: t.Description, Parameters: nullToNil(t.InputSchema)}
		if tool.Cache, err = t.CacheControl.control(); err != nil {
			return nil, false, fmt.Errorf("tools[%d]: %v", i, err)
		}
		req.Tools = append(req.Tools, tool)
	}
	if tc := in.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto":
			req.ToolChoice = &llmclient.ToolChoice{Mode: llmclient.ToolChoiceAuto}
		case "any":
			req.ToolChoice = &llmclient.ToolChoice{Mode: llmclient.ToolChoiceRequired}
		case "none":
			req.ToolChoice = &llmclient.ToolChoice{Mode: llmclient.ToolChoiceNone}
		case "tool":
			req.ToolChoice = &llmclient.ToolChoice{Mode: llmclient.ToolChoiceTool, Name: tc.Name}
		default:
			return nil, false, fmt.Errorf("tool_choice: type %q is not auto, any, none or tool", tc.Type)
		}
		req.DisableParallelToolCalls = tc.DisableParallelToolUse
	}
	return req, in.Stream, nil
}

// anMessages turns one Messages turn into common messages: tool_result blocks become
// tool messages of their own, ahead of the turn's other content.
func anMessages(m anMessage) ([]llmclient.Message, error) {
	var role llmclient.Role
	switch m.Role {
	case "user":
		role = llmclient.RoleUser
	case "assistant":
		role = llmclient.RoleAssistant
	default:
		return nil, fmt.Errorf("role %q is not user or assistant", m.Role)
	}
	bs, err := blocks(m.Content)
	if err != nil {
		return nil, fmt.Errorf("content: %v", err)
	}
	var out []llmclient.Message
	msg := llmclient.Message{Role: role}
	for i, b := range bs {
		cc, err := b.CacheControl.control()
		if err != nil {
			return nil, fmt.Errorf("content[%d]: %v", i, err)
		}
		switch b.Type {
		case "text":
			p := llmclient.TextPart(b.Text)
			p.Cache = cc
			msg.Content = append(msg.Content, p)
		case "image":
			p, err := anImage(b)
			if err != nil {
				return nil, fmt.Errorf("content[%d]: %v", i, err)
			}
			p.Cache = cc
			msg.Content = append(msg.Content, p)
		case "tool_use":
			if role != llmclient.RoleAssistant {
				return nil, fmt.Errorf("content[%d]: tool_use in a user turn", i)
			}
			args := string(bytes.TrimSpace(b.Input))
			if args == "" || args == "null" {
				args = "{}"
			}
			msg.ToolCalls = append(msg.ToolCalls, llmclient.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		case "tool_result":
			if role != llmclient.RoleUser {
				return nil, fmt.Errorf("content[%d]: tool_result in an assistant turn", i)
			}
			tm, err := anToolResult(b)
			if err != nil {
				return nil, fmt.Errorf("content[%d].%v", i, err)
			}
			tm.Cache = cc
			out = append(out, tm)
		case "thinking", "redacted_thinking":
			// Thinking blocks carry a vendor signature the common request cannot hold;
			// they are dropped.
		default:
			return nil, fmt.Errorf("content[%d]: block type %q is not supported", i, b.Type)
		}
	}
	if len(msg.Content) > 0 || len(msg.ToolCalls) > 0 || len(out) == 0 {
		out = append(out, msg)
	}
	return out, nil
}

// anImage reads an image block's source.
func anImage(b anBlock) (llmclient.Part, error) {
	if b.Source == nil {
		return llmclient.Part{}, fmt.Errorf("source: Field required")
	}
	switch b.Source.Type {
	case "base64":
		data, err := base64.StdEncoding.DecodeString(b.Source.Data)
		if err != nil {
			return llmclient.Part{}, fmt.Errorf("source.data is not base64")
		}
		return llmclient.ImageDataPart(b.Source.MediaType, data), nil
	case "url":
		return llmclient.ImageURLPart(b.Source.URL), nil
	}
	return llmclient.Part{}, fmt.Errorf("source.type %q is not base64 or url", b.Source.Type)
}

// anToolResult turns a tool_result block into a tool message: its text and image blocks
// (with their cache marks) and is_error. Other blocks (documents, search results) are
// refused: the common request has no place for them. An error names the field inside
// the block ("content[1]: …"); the caller prefixes the block's own position.
func anToolResult(b anBlock) (llmclient.Message, error) {
	tm := llmclient.Message{Role: llmclient.RoleTool, ToolCallID: b.ToolUseID, IsError: b.IsError}
	inner, err := blocks(b.Content)
	if err != nil {
		return tm, fmt.Errorf("content: %v", err)
	}
	for j, ib := range inner {
		var p llmclient.Part
		switch ib.Type {
		case "text":
			p = llmclient.TextPart(ib.Text)
		case "image":
			if p, err = anImage(ib); err != nil {
				return tm, fmt.Errorf("content[%d]: %v", j, err)
			}
		default:
			return tm, fmt.Errorf("content[%d]: block type %q is not supported in a tool_result (text and image are)", j, ib.Type)
		}
		if p.Cache, err = ib.CacheControl.control(); err != nil {
			return tm, fmt.Errorf("content[%d]: %v", j, err)
		}
		tm.Content = append(tm.Content, p)
	}
	if len(tm.Content) == 0 {
		tm.Content = []llmclient.Part{llmclient.TextPart("")}
	}
	return tm, nil
}

// The answer.

type anResponse struct {
	ID           string       `json:"id"`
	Type         string       `json:"type"`
	Role         string       `json:"role"`
	Model        string       `json:"model"`
	Content      []anOutBlock `json:"content"`
	StopReason   string       `json:"stop_reason"`
	StopSequence *string      `json:"stop_sequence"`
	Usage        anUsage      `json:"usage"`
}

type anOutBlock struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

type anUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// anUsageOf reports u as Anthropic does: input_tokens without the cache's reads and
// writes, which it counts apart.
func anUsageOf(u llmclient.Usage) anUsage {
	return anUsage{
		InputTokens:  max(u.InputTokens-u.CachedInputTokens-u.CacheWriteTokens, 0),
		OutputTokens: u.OutputTokens, CacheCreationInputTokens: u.CacheWriteTokens, CacheReadInputTokens: u.CachedInputTokens,
	}
}

// anStop is the Messages stop_reason of an answer that ended with f (raw: the vendor's
// own word). refusal says the answer is a refusal message alone (OpenAI's
// message.refusal, with finish_reason "stop"): Anthropic ends a refusal "refusal".
func anStop(f finish.Reason, raw string, refusal bool) string {
	switch f {
	case finish.Length:
		return "max_tokens"
	case finish.ToolCalls:
		return "tool_use"
	case finish.Refusal, finish.ContentFilter:
		return "refusal"
	}
	if refusal {
		return "refusal"
	}
	if raw == "stop_sequence" {
		return raw
	}
	return "end_turn"
}

// refusalOnly reports whether resp is a refusal message and nothing else.
func refusalOnly(resp *llmclient.Response) bool {
	return resp.Refusal != "" && resp.Text == "" && len(resp.ToolCalls) == 0
}

// anStopSequence is the stop_sequence of an answer whose stop reason is stop: the
// sequence that matched. The Client's Response does not say which one did, so it is
// known only when the request gave one sequence; null otherwise.
func anStopSequence(stop string, stops []string) *string {
	if stop != "stop_sequence" || len(stops) != 1 {
		return nil
	}
	s := stops[0]
	return &s
}

// toolInput is a tool call's arguments as a JSON object ({} when they are not one).
func toolInput(args string) json.RawMessage {
	a := bytes.TrimSpace([]byte(args))
	if len(a) > 0 && a[0] == '{' && json.Valid(a) {
		return a
	}
	return json.RawMessage("{}")
}

// encodeAnthropic renders resp as a Messages answer; stops are the request's stop
// sequences.
func encodeAnthropic(resp *llmclient.Response, id, model string, stops []string) []byte {
	out := anResponse{ID: id, Type: "message", Role: "assistant", Model: model, Content: []anOutBlock{},
		StopReason: anStop(resp.FinishReason, resp.RawFinishReason, refusalOnly(resp)), Usage: anUsageOf(resp.Usage)}
	out.StopSequence = anStopSequence(out.StopReason, stops)
	text := resp.Text
	if text == "" && resp.Refusal != "" {
		text = resp.Refusal
	}
	if text != "" {
		out.Content = append(out.Content, anOutBlock{Type: "text", Text: &text})
	}
	for _, tc := range resp.ToolCalls {
		out.Content = append(out.Content, anOutBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: toolInput(tc.Arguments)})
	}
	b, _ := json.Marshal(out)
	return b
}

// anStreamWriter renders Chunks as Messages SSE events: message_start, one content
// block per text run or tool call, message_delta with the stop reason and usage,
// message_stop. Blocks are sent one at a time, each delta to the block open.
//
// A tool call's block stays open until the message ends: another vendor may send more
// of a call's arguments after the next call, or text, has begun (OpenAI's deltas name
// their call by index, in any order). What comes while a tool block is open is held
// (text and other calls, in the order they began) and sent as whole blocks at the end,
// so that a late delta always has its block to go to.
type anStreamWriter struct {
	id, model string
	stops     []string // the request's stop sequences
	started   bool
	refused   bool   // a refusal message was sent
	answered  bool   // text or a tool call was sent
	open      bool   // a content block is open
	kind      string // "text" or "tool_use"
	toolIndex int    // the open tool block's Chunk tool index
	index     int    // the next block's index
	held      []heldBlock
	buf       bytes.Buffer
}

// heldBlock is a block that began while a tool block was open, sent at the end.
type heldBlock struct {
	tool      bool
	toolIndex int
	id, name  string
	data      []byte // the text, or the tool call's arguments
}

func (s *anStreamWriter) event(name string, v any) {
	s.buf.WriteString("event: ")
	s.buf.WriteString(name)
	s.buf.WriteString("\ndata: ")
	enc := json.NewEncoder(&s.buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	s.buf.Truncate(s.buf.Len() - 1)
	s.buf.WriteString("\n\n")
}

type jsonObject = map[string]any

func (s *anStreamWriter) start() {
	if s.started {
		return
	}
	s.started = true
	s.event("message_start", jsonObject{"type": "message_start", "message": jsonObject{
		"id": s.id, "type": "message", "role": "assistant", "model": s.model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": anUsage{},
	}})
}

func (s *anStreamWriter) closeBlock() {
	if s.open {
		s.event("content_block_stop", jsonObject{"type": "content_block_stop", "index": s.index - 1})
		s.open = false
	}
}

func (s *anStreamWriter) openBlock(kind string, block jsonObject) {
	s.closeBlock()
	s.event("content_block_start", jsonObject{"type": "content_block_start", "index": s.index, "content_block": block})
	s.open, s.kind = true, kind
	s.index++
}

func (s *anStreamWriter) textDelta(text string) {
	s.event("content_block_delta", jsonObject{"type": "content_block_delta", "index": s.index - 1,
		"delta": jsonObject{"type": "text_delta", "text": text}})
}

func (s *anStreamWriter) jsonDelta(args string) {
	s.event("content_block_delta", jsonObject{"type": "content_block_delta", "index": s.index - 1,
		"delta": jsonObject{"type": "input_json_delta", "partial_json": args}})
}

// holding reports whether a block that begins now must be held: a tool block is open,
// or blocks are held already (they go out in the order they began).
func (s *anStreamWriter) holding() bool {
	return len(s.held) > 0 || (s.open && s.kind == "tool_use")
}

// chunk renders c; the bytes are valid until the next call.
func (s *anStreamWriter) chunk(c llmclient.Chunk) []byte {
	s.buf.Reset()
	s.start()
	text := c.Text
	if text == "" {
		text = c.Refusal
	}
	s.refused = s.refused || c.Refusal != ""
	s.answered = s.answered || c.Text != ""
	if text != "" {
		switch {
		case s.holding():
			if n := len(s.held); n > 0 && !s.held[n-1].tool {
				s.held[n-1].data = append(s.held[n-1].data, text...)
			} else {
				s.held = append(s.held, heldBlock{data: []byte(text)})
			}
		case s.open && s.kind == "text":
			s.textDelta(text)
		default:
			s.openBlock("text", jsonObject{"type": "text", "text": ""})
			s.textDelta(text)
		}
	}
	for _, tc := range c.ToolCalls {
		if tc.ID == "" && tc.Name == "" && tc.Arguments == "" {
			continue // carries no part of a call
		}
		s.answered = true
		if s.open && s.kind == "tool_use" && s.toolIndex == tc.Index {
			if tc.Arguments != "" {
				s.jsonDelta(tc.Arguments)
			}
			continue
		}
		if h := s.heldTool(tc.Index); h != nil {
			h.id, h.name = cmp.Or(h.id, tc.ID), cmp.Or(h.name, tc.Name)
			h.data = append(h.data, tc.Arguments...)
			continue
		}
		if s.holding() {
			s.held = append(s.held, heldBlock{tool: true, toolIndex: tc.Index, id: tc.ID, name: tc.Name, data: []byte(tc.Arguments)})
			continue
		}
		s.openBlock("tool_use", jsonObject{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": jsonObject{}})
		s.toolIndex = tc.Index
		if tc.Arguments != "" {
			s.jsonDelta(tc.Arguments)
		}
	}
	return s.buf.Bytes()
}

// heldTool is the held block of the tool call with Chunk tool index i, or nil.
func (s *anStreamWriter) heldTool(i int) *heldBlock {
	for k := range s.held {
		if s.held[k].tool && s.held[k].toolIndex == i {
			return &s.held[k]
		}
	}
	return nil
}

// closeAll closes the open block and sends the held ones whole.
func (s *anStreamWriter) closeAll() {
	s.closeBlock()
	for _, h := range s.held {
		if h.tool {
			s.openBlock("tool_use", jsonObject{"type": "tool_use", "id": h.id, "name": h.name, "input": jsonObject{}})
			if len(h.data) > 0 {
				s.jsonDelta(string(h.data))
			}
		} else {
			s.openBlock("text", jsonObject{"type": "text", "text": ""})
			s.textDelta(string(h.data))
		}
		s.closeBlock()
	}
	s.held = nil
}

// end closes the message after a clean end, or an answer the vendor filtered or refused.
func (s *anStreamWriter) end(resp *llmclient.Response) []byte {
	s.buf.Reset()
	s.start()
	s.closeAll()
	u := anUsageOf(resp.Usage)
	stop := anStop(resp.FinishReason, resp.RawFinishReason, s.refused && !s.answered)
	s.event("message_delta", jsonObject{"type": "message_delta",
		"delta": jsonObject{"stop_reason": stop, "stop_sequence": anStopSequence(stop, s.stops)},
		"usage": u})
	s.event("message_stop", jsonObject{"type": "message_stop"})
	return s.buf.Bytes()
}

// fail renders an in-band error event, as Anthropic sends one after HTTP 200.
func (s *anStreamWriter) fail(e *apiError) []byte {
	s.buf.Reset()
	s.event("error", anErrorBody{Type: "error", Error: anErrorObject{Type: e.anType, Message: e.message}})
	return s.buf.Bytes()
}
