package llmclient

import "strings"

// accumulate assembles a Response from stream chunks: text and reasoning concatenated, tool
// calls assembled by index, the last finish reason and usage.
func accumulate(chunks []Chunk) *Response {
	r := &Response{}
	var text, reasoning, refusal strings.Builder
	var calls []ToolCall
	index := map[int]int{}
	for i := range chunks {
		ch := &chunks[i]
		text.WriteString(ch.Text)
		reasoning.WriteString(ch.Reasoning)
		refusal.WriteString(ch.Refusal)
		for _, d := range ch.ToolCalls {
			j, ok := index[d.Index]
			if !ok {
				j = len(calls)
				index[d.Index] = j
				calls = append(calls, ToolCall{})
			}
			tc := &calls[j]
			if d.ID != "" {
				tc.ID = d.ID
			}
			if d.Name != "" {
				tc.Name = d.Name
			}
			tc.Arguments += d.Arguments
		}
		if ch.FinishReason != FinishNone {
			r.FinishReason, r.RawFinishReason = ch.FinishReason, ch.RawFinishReason
		}
		if ch.Usage != nil {
			r.Usage = *ch.Usage
		}
		if ch.ID != "" {
			r.ID = ch.ID
		}
		if ch.Model != "" {
			r.Model = ch.Model
		}
	}
	r.Text, r.Reasoning, r.Refusal, r.ToolCalls = text.String(), reasoning.String(), refusal.String(), calls
	return r
}

// ContinuationRequest returns a copy of req that continues an interrupted stream: the
// partial output is appended as an assistant message (text and the tool calls whose
// arguments are complete JSON objects). Vendors that continue a trailing assistant message
// (Anthropic prefill, DeepSeek and others' prefix completion) pick up where the stream
// broke; for others, append a user message asking to continue. It returns nil when err
// carries no partial output.
func ContinuationRequest(req *Request, err error) *Request {
	e, ok := err.(*Error)
	if !ok || e.Partial == nil || req == nil {
		return nil
	}
	p := e.Partial
	msg := Message{Role: RoleAssistant}
	if p.Text != "" {
		msg.Content = []Part{TextPart(p.Text)}
	}
	for _, tc := range p.ToolCalls {
		if completeJSON(tc.Arguments) {
			msg.ToolCalls = append(msg.ToolCalls, tc)
		}
	}
	if len(msg.Content) == 0 && len(msg.ToolCalls) == 0 {
		return nil
	}
	cp := *req
	cp.Messages = append(append(make([]Message, 0, len(req.Messages)+1), req.Messages...), msg)
	return &cp
}

// completeJSON reports whether s looks like a whole JSON object (balanced braces outside
// strings); a tool call cut mid-arguments is not sent back.
func completeJSON(s string) bool {
	s = strings.TrimSpace(s)
	if len(s) < 2 || s[0] != '{' {
		return false
	}
	depth, inStr, esc := 0, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
			if depth == 0 && i != len(s)-1 {
				return false
			}
		}
	}
	return depth == 0 && !inStr
}
