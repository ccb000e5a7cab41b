package openai

import (
	"bytes"
	"encoding/json"
	"sync/atomic"
	"unsafe"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/format"
	"github.com/llmclient/llmclient/internal/jsonscan"
)

// scanChat reads a Chat Completions body in one pass with the allocation-light scanner:
// what the transport needs to route the call and estimate its tokens. It reports false
// when the body is not the JSON it expects (a syntax error, or a field of another type),
// and inspectChat then reads it leniently with encoding/json.
func scanChat(body []byte, call *llmclient.APICall) bool {
	return scanChatInto(body, call, nil, nil)
}

// scanChatInto is scanChat writing the first messages and their one-part contents into
// the arrays of msgs and parts (from index 0, up to their capacity; more grow as usual).
// Without room in msgs, a body with messages takes a block for a system prompt and a turn
// or two, with their plain-string contents, in one allocation. The strings are the body's
// own bytes (bodyText).
func scanChatInto(body []byte, call *llmclient.APICall, msgs []llmclient.Message, parts []llmclient.Part) bool {
	var sc jsonscan.Scanner
	sc.Reset(body)
	req := &call.Request
	var maxTokens, maxCompletion int64
	for ok := sc.Object(); ok; ok = sc.More() {
		switch k := sc.Key(); string(k) { // the conversion does not allocate in a switch
		case "model":
			req.Model = chatModels.name(sc.Str())
		case "stream":
			if k := sc.Peek(); k != jsonscan.Bool && k != jsonscan.Null {
				return false
			}
			call.Stream = sc.Bool()
		case "max_tokens":
			maxTokens = sc.Int()
		case "max_completion_tokens":
			maxCompletion = sc.Int()
		case "messages":
			if !scanMessages(&sc, body, req, msgs, &parts) {
				return false
			}
		case "tools":
			if !scanTools(&sc, body, req) {
				return false
			}
		case "response_format":
			if !scanResponseFormat(&sc, body, req) {
				return false
			}
		case "prompt_cache_key":
			if k := sc.Peek(); k != jsonscan.String && k != jsonscan.Null {
				return false
			}
			req.PromptCacheKey = bodyText(&sc, body)
		default:
			if folds(k, topKeys) {
				return false
			}
			sc.Skip()
		}
	}
	sc.End()
	if sc.Err() != nil {
		return false
	}
	req.MaxTokens = int(clampTokens(maxCompletion))
	if req.MaxTokens == 0 {
		req.MaxTokens = int(clampTokens(maxTokens))
	}
	return true
}

// clampTokens keeps a token count the body states within [0, 1<<40].
func clampTokens(n int64) int64 { return min(max(n, 0), 1<<40) }

// scanMessages reads the messages into req, the first ones into msgs's array (a block of
// their own when it has no room). Their content parts given as a plain string share the
// backing array parts, grown a few at a time.
func scanMessages(sc *jsonscan.Scanner, body []byte, req *llmclient.Request, msgs []llmclient.Message, parts *[]llmclient.Part) bool {
	switch sc.Peek() {
	case jsonscan.Array:
	case jsonscan.Null:
		sc.Null()
		return true
	default:
		return false
	}
	for ok := sc.Array(); ok; ok = sc.More() {
		if sc.Peek() != jsonscan.Object {
			return false
		}
		if req.Messages == nil {
			if cap(msgs) == 0 {
				blk := new(messageBlock)
				msgs, *parts = blk.messages[:], blk.parts[:0]
			}
			req.Messages, *parts = msgs[:0], (*parts)[:0]
		}
		// The message is read in place (on a failure the caller discards the request).
		req.Messages = append(req.Messages, llmclient.Message{})
		m := &req.Messages[len(req.Messages)-1]
		for ok := sc.Object(); ok; ok = sc.More() {
			switch k := sc.Key(); string(k) {
			case "role":
				m.Role = roleOf(sc.Str())
			case "content":
				if !scanContent(sc, body, m, parts) {
					return false
				}
			case "name":
				m.Name = bodyText(sc, body)
			case "tool_call_id":
				m.ToolCallID = bodyText(sc, body)
			case "tool_calls":
				if !scanToolCalls(sc, body, m) {
					return false
				}
			default:
				if folds(k, messageKeys) {
					return false
				}
				sc.Skip()
			}
		}
		if m.Role == "" {
			m.Role = llmclient.RoleUser
		}
	}
	return sc.Err() == nil
}

// chatModels are the model names Chat Completions bodies named lately. The model is the
// one string of a body that outlives its call (in attempt traces, errors and events):
// kept apart from the body's other strings, it never holds them in memory.
var chatModels nameCache

// nameCache keeps a few recently read names, so that reading one again does not
// allocate: one slot per hash of the name, each replaced by the latest name that maps to
// it. Safe for concurrent use.
type nameCache struct {
	slots [16]atomic.Pointer[string]
}

// name returns b as a string, the cached one when equal.
func (c *nameCache) name(b []byte) string {
	if len(b) == 0 || len(b) > 128 {
		return string(b)
	}
	slot := &c.slots[(uint(len(b))*31+uint(b[len(b)/2])*7+uint(b[len(b)-1]))%uint(len(c.slots))]
	if p := slot.Load(); p != nil && *p == string(b) {
		return *p
	}
	s := string(b)
	slot.Store(&s)
	return s
}

// messageBlock is the first backing arrays of a body's messages and their one-part
// contents.
type messageBlock struct {
	messages [4]llmclient.Message
	parts    [4]llmclient.Part
}

// bodyText reads a string value as a Go string; null reads as "". A string without
// escapes is body's own bytes, not copied (Provider.Inspect: the caller keeps body
// unchanged while it uses the call); an unescaped one is a copy.
func bodyText(sc *jsonscan.Scanner, body []byte) string {
	b := sc.Str()
	if len(b) == 0 {
		return ""
	}
	if p, start := uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&body[0])); p >= start && p-start < uintptr(len(body)) {
		return unsafe.String(&b[0], len(b))
	}
	return string(b)
}

// roleOf maps a role name without allocating.
func roleOf(r []byte) llmclient.Role {
	switch string(r) {
	case "system", "developer":
		return llmclient.RoleSystem
	case "assistant":
		return llmclient.RoleAssistant
	case "tool", "function":
		return llmclient.RoleTool
	}
	return llmclient.RoleUser
}

func scanContent(sc *jsonscan.Scanner, body []byte, m *llmclient.Message, parts *[]llmclient.Part) bool {
	switch sc.Peek() {
	case jsonscan.String:
		if len(*parts) == cap(*parts) {
			*parts = make([]llmclient.Part, 0, 4)
		}
		i := len(*parts)
		*parts = (*parts)[:i+1]
		(*parts)[i] = llmclient.Part{Type: llmclient.PartText, Text: bodyText(sc, body)} // in place
		m.Content = (*parts)[i : i+1 : i+1]                                              // a caller's append to it cannot reach the next message's
		return true
	case jsonscan.Null:
		sc.Null()
		return true
	case jsonscan.Array:
	default:
		return false
	}
	for ok := sc.Array(); ok; ok = sc.More() {
		if sc.Peek() != jsonscan.Object {
			return false
		}
		var typ, text, refusal, detail, urlDetail string
		for ok := sc.Object(); ok; ok = sc.More() {
			switch k := sc.Key(); string(k) {
			case "type":
				typ = bodyText(sc, body)
			case "text":
				text = bodyText(sc, body)
			case "refusal":
				refusal = bodyText(sc, body)
			case "detail":
				detail = bodyText(sc, body)
			case "image_url":
				if sc.Peek() == jsonscan.Object {
					for ok := sc.Object(); ok; ok = sc.More() {
						if k := sc.Key(); string(k) == "detail" {
							urlDetail = bodyText(sc, body)
						} else if folds(k, urlKeys) {
							return false
						} else {
							sc.Skip()
						}
					}
				} else {
					sc.Skip()
				}
			default:
				if folds(k, partKeys) {
					return false
				}
				sc.Skip()
			}
		}
		switch typ { // as parts does
		case "image_url", "input_image":
			if urlDetail != "" {
				detail = urlDetail
			}
			m.Content = append(m.Content, llmclient.Part{Type: llmclient.PartImage, Detail: detail})
		case "input_audio", "file", "input_file":
			m.Content = append(m.Content, llmclient.Part{Type: llmclient.PartImage})
		default:
			if text != "" {
				m.Content = append(m.Content, llmclient.TextPart(text))
			} else if refusal != "" {
				m.Content = append(m.Content, llmclient.TextPart(refusal))
			}
		}
	}
	return sc.Err() == nil
}

func scanToolCalls(sc *jsonscan.Scanner, body []byte, m *llmclient.Message) bool {
	if sc.Peek() == jsonscan.Null {
		sc.Null()
		return true
	}
	if sc.Peek() != jsonscan.Array {
		return false
	}
	for ok := sc.Array(); ok; ok = sc.More() {
		var tc llmclient.ToolCall
		for ok := sc.Object(); ok; ok = sc.More() {
			switch k := sc.Key(); string(k) {
			case "id":
				tc.ID = bodyText(sc, body)
			case "function":
				for ok := sc.Object(); ok; ok = sc.More() {
					switch k := sc.Key(); string(k) {
					case "name":
						tc.Name = bodyText(sc, body)
					case "arguments":
						tc.Arguments = bodyText(sc, body)
					default:
						if folds(k, callFuncKeys) {
							return false
						}
						sc.Skip()
					}
				}
			default:
				if folds(k, callKeys) {
					return false
				}
				sc.Skip()
			}
		}
		m.ToolCalls = append(m.ToolCalls, tc)
	}
	return sc.Err() == nil
}

func scanTools(sc *jsonscan.Scanner, body []byte, req *llmclient.Request) bool {
	if sc.Peek() == jsonscan.Null {
		sc.Null()
		return true
	}
	if sc.Peek() != jsonscan.Array {
		return false
	}
	for ok := sc.Array(); ok; ok = sc.More() {
		var t llmclient.Tool
		for ok := sc.Object(); ok; ok = sc.More() {
			if k := sc.Key(); string(k) != "function" {
				if folds(k, toolKeys) {
					return false
				}
				sc.Skip()
				continue
			}
			for ok := sc.Object(); ok; ok = sc.More() {
				switch k := sc.Key(); string(k) {
				case "name":
					t.Name = bodyText(sc, body)
				case "description":
					t.Description = bodyText(sc, body)
				case "parameters":
					t.Parameters = rawValue(sc, body)
				default:
					if folds(k, toolFuncKeys) {
						return false
					}
					sc.Skip()
				}
			}
		}
		req.Tools = append(req.Tools, t)
	}
	return sc.Err() == nil
}

func scanResponseFormat(sc *jsonscan.Scanner, body []byte, req *llmclient.Request) bool {
	if sc.Peek() != jsonscan.Object {
		sc.Skip()
		return sc.Err() == nil
	}
	var name string
	var schema json.RawMessage
	for ok := sc.Object(); ok; ok = sc.More() {
		if k := sc.Key(); string(k) != "json_schema" || sc.Peek() != jsonscan.Object {
			if string(k) != "json_schema" && folds(k, formatKeys) {
				return false
			}
			sc.Skip()
			continue
		}
		for ok := sc.Object(); ok; ok = sc.More() {
			switch k := sc.Key(); string(k) {
			case "name":
				name = bodyText(sc, body)
			case "schema":
				schema = rawValue(sc, body)
			default:
				if folds(k, schemaKeys) {
					return false
				}
				sc.Skip()
			}
		}
	}
	if len(schema) > 0 {
		req.ResponseFormat = &llmclient.ResponseFormat{Type: format.JSONSchema, Name: name, Schema: schema}
	}
	return sc.Err() == nil
}

// rawValue skips the next value and returns its bytes in body (not copied: the transport
// keeps the body for the call's lifetime, and the estimate only reads them).
func rawValue(sc *jsonscan.Scanner, body []byte) json.RawMessage {
	start := sc.Offset()
	sc.Skip()
	if sc.Err() != nil {
		return nil
	}
	return bytes.TrimSpace(body[start:sc.Offset()])
}

// The member names the scanner reads at each level.
var (
	topKeys      = []string{"model", "stream", "max_tokens", "max_completion_tokens", "messages", "tools", "response_format", "prompt_cache_key"}
	messageKeys  = []string{"role", "content", "name", "tool_call_id", "tool_calls"}
	partKeys     = []string{"type", "text", "refusal", "detail", "image_url"}
	urlKeys      = []string{"detail"}
	callKeys     = []string{"id", "function"}
	callFuncKeys = []string{"name", "arguments"}
	toolKeys     = []string{"function"}
	toolFuncKeys = []string{"name", "description", "parameters"}
	formatKeys   = []string{"json_schema"}
	schemaKeys   = []string{"name", "schema"}
)

// folds reports whether k, not one of a level's names, matches one of them without regard
// to case. encoding/json matches such a member (it folds case), so the scanner leaves the
// body to it rather than read it differently.
func folds(k []byte, names []string) bool {
	for _, n := range names {
		if len(k) == len(n) && bytes.EqualFold(k, []byte(n)) {
			return true
		}
	}
	return false
}
