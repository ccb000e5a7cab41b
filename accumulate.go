package llmclient

import (
	"errors"
	"strings"

	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/finish"
)

// accumulator assembles a Response from stream chunks as they arrive: text, reasoning
// and refusal appended, tool calls assembled by index with their arguments appended, the
// last finish reason, usage, id and model. Its memory grows with the output it keeps,
// never with the number of chunks: a tool call is kept from its first delta that carries
// an id, a name or arguments, and a delta that carries none of them (whatever its index)
// keeps nothing. Tool calls are in the order in which they were kept. The zero value is
// ready to use.
type accumulator struct {
	text, reasoning, refusal strings.Builder
	calls                    []*toolAcc       // by pointer: a Builder must not move once written
	byIndex                  map[int]*toolAcc // calls by index, once there are many
	finish                   finish.Reason
	rawFinish                string
	usage                    *Usage
	id, model                string
	// answered: a chunk carried text, a refusal or a tool call. preReasoning is the length
	// of the reasoning up to and including that chunk's: the reasoning before the answer,
	// which a restart is not asked to repeat (splicer).
	answered     bool
	preReasoning int
}

type toolAcc struct {
	index    int
	id, name string
	args     strings.Builder
	// reasoning is the length of the reasoning when the call began (its chunk's included).
	reasoning int
}

// add folds one chunk in.
func (a *accumulator) add(ch *Chunk) {
	a.text.WriteString(ch.Text)
	a.reasoning.WriteString(ch.Reasoning)
	a.refusal.WriteString(ch.Refusal)
	if !a.answered && (ch.Text != "" || ch.Refusal != "" || carriesCalls(ch.ToolCalls)) {
		a.answered, a.preReasoning = true, a.reasoning.Len()
	}
	for _, d := range ch.ToolCalls {
		if !carriesCall(&d) {
			continue // nothing to keep: no call is added for it
		}
		tc := a.call(d.Index)
		if d.ID != "" {
			tc.id = d.ID
		}
		if d.Name != "" {
			tc.name = d.Name
		}
		tc.args.WriteString(d.Arguments)
	}
	a.meta(ch)
}

// carriesCall reports whether a tool-call delta carries part of a call: an id, a name or
// arguments. One that carries none of them is no output: the accumulator keeps nothing of
// it, the splicer drops it, and it answers nothing for the empty-output check.
func carriesCall(d *dialect.ToolCallDelta) bool {
	return d.ID != "" || d.Name != "" || d.Arguments != ""
}

// carriesCalls reports whether any of ds carries part of a call (carriesCall).
func carriesCalls(ds []dialect.ToolCallDelta) bool {
	for i := range ds {
		if carriesCall(&ds[i]) {
			return true
		}
	}
	return false
}

// meta folds in what a chunk says besides its content.
func (a *accumulator) meta(ch *Chunk) {
	if ch.FinishReason != finish.None {
		a.finish, a.rawFinish = ch.FinishReason, ch.RawFinishReason
	}
	if ch.Usage != nil {
		u := *ch.Usage
		a.usage = &u
	}
	if ch.ID != "" {
		a.id = ch.ID
	}
	if ch.Model != "" {
		a.model = ch.Model
	}
}

// call returns the tool call with the given index, adding it on first sight. The call
// last added is checked first (its deltas usually arrive together); past manyCalls calls
// a map finds the others, so an upstream that sends a new index in every chunk costs
// linear time, not quadratic. Calls are kept by pointer: their argument builders stay
// where they are when the slice grows (a copied, written Builder panics on its next
// write, as interleaved deltas of parallel calls would make it).
func (a *accumulator) call(index int) *toolAcc {
	n := len(a.calls)
	if n > 0 && a.calls[n-1].index == index {
		return a.calls[n-1]
	}
	if a.byIndex != nil {
		if tc, ok := a.byIndex[index]; ok {
			return tc
		}
	} else {
		for _, tc := range a.calls {
			if tc.index == index {
				return tc
			}
		}
	}
	tc := &toolAcc{index: index, reasoning: a.reasoning.Len()}
	a.calls = append(a.calls, tc)
	switch {
	case a.byIndex != nil:
		a.byIndex[index] = tc
	case len(a.calls) > manyCalls:
		a.byIndex = make(map[int]*toolAcc, 2*len(a.calls))
		for _, c := range a.calls {
			a.byIndex[c.index] = c
		}
	}
	return tc
}

// manyCalls is the number of tool calls past which the accumulator indexes them.
const manyCalls = 16

// response returns what was accumulated so far.
func (a *accumulator) response() *Response {
	r := &Response{Text: a.text.String(), Reasoning: a.reasoning.String(), Refusal: a.refusal.String(),
		FinishReason: a.finish, RawFinishReason: a.rawFinish, ID: a.id, Model: a.model}
	if a.usage != nil {
		r.Usage = *a.usage
	}
	for _, tc := range a.calls {
		r.ToolCalls = append(r.ToolCalls, ToolCall{ID: tc.id, Name: tc.name, Arguments: tc.args.String()})
	}
	return r
}

// answerReasoning returns the length of the reasoning before the answer began (all of it
// when it has not begun).
func (a *accumulator) answerReasoning() int {
	if !a.answered {
		return a.reasoning.Len()
	}
	return a.preReasoning
}

// accumulate assembles the Response of a finished list of chunks.
func accumulate(chunks []Chunk) *Response {
	var a accumulator
	for i := range chunks {
		a.add(&chunks[i])
	}
	return a.response()
}

// ContinuationRequest returns a copy of req that continues an interrupted stream: the
// partial output is appended as an assistant message (its text, then its refusal, and the
// tool calls whose arguments are complete JSON objects). A Message holds no refusal of its
// own, so a delivered refusal goes as a text part of its own, after the text: what the
// model said is sent back whole, and a model that continues it answers the rest of the
// refusal as text. Its reasoning is not sent. Models that continue a trailing assistant
// message (a prefill: earlier Claude models, DeepSeek's prefix completion) pick up where
// the stream broke; others answer it with a 400 (current Claude models) or start over.
// Client.Stream continues a broken stream by itself (WithStreamContinuation), with this
// request only where the target accepts a prefill (Prefiller, WithPrefill) and the
// caller received text alone (no refusal, no tool call). It returns nil when err carries
// no partial output.
func ContinuationRequest(req *Request, err error) *Request {
	var e *Error
	if !errors.As(err, &e) || e.Partial == nil || req == nil {
		return nil
	}
	p := e.Partial
	msg := Message{Role: RoleAssistant}
	if p.Text != "" {
		msg.Content = []Part{TextPart(p.Text)}
	}
	if p.Refusal != "" {
		msg.Content = append(msg.Content, TextPart(p.Refusal))
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
