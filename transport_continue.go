package llmclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
)

// The API shapes whose streams the transport continues (see txCont). They are the
// Shape values of provider/openai's chat completions and provider/anthropic's messages;
// the root package cannot import the providers.
const (
	shapeOpenAIChat        dialect.Shape = "openai.chat_completions"
	shapeAnthropicMessages dialect.Shape = "anthropic.messages"
)

// continuable reports whether the transport continues a broken stream of this shape: the
// wire must let it go on emitting the fallback's events in the first stream's terms.
func continuable(shape dialect.Shape) bool {
	return shape == shapeOpenAIChat || shape == shapeAnthropicMessages
}

// txCont is a transport stream body's continuation state (WithStreamContinuation): what
// the caller received, decoded, and how the fallback's chunks are written back in the
// events of the first stream.
//
// Until a break, the body delivers the upstream's bytes unchanged, but only whole events
// the decoder has read (the recorder feeds the decoder one event at a time), so that at a
// break the caller holds exactly the decoded answer and no half event. After a
// continuation, the new attempt is decoded and its chunks re-encoded (openAIWriter,
// anthropicWriter) after a restart's splice (the splicer of Client.Stream).
type txCont struct {
	link    *streamLink // the call's context and committed attempt, shared with Close
	acc     accumulator // what the caller received
	prior   Usage       // the usage of the attempts before the one being read
	splice  *splicer
	w       eventWriter
	active  bool    // a continuation is being read: its chunks are re-encoded
	pending []Chunk // the continuation's chunks read before its commit point
	pendEnd bool    // and it ended there
	out     []byte  // encoded events not yet delivered
	frec    *recorder
	// raws are the fallbacks' bodies, closed with the body.
	raws []io.Closer
}

// eventWriter writes decoded chunks as the events of the caller's stream.
type eventWriter interface {
	// event follows an event of the first stream, as the caller received it.
	event(ev []byte)
	// chunk appends ch's events to out; usage is the summed usage ch reports (nil: none).
	chunk(out []byte, ch *Chunk, usage *Usage) []byte
	// end appends the stream's closing events.
	end(out []byte, usage *Usage) []byte
}

// setPrefill arranges (on) or undoes the request body that sends partial as a trailing
// assistant message.
func (x *txCall) setPrefill(on bool, partial *Response) {
	x.prefill = nil
	if !on || x.body.buf == nil {
		return
	}
	x.prefill = prefillBody(x.body.buf, partial.Text)
}

// prefillBody returns body with an assistant message holding text appended to its
// "messages", or nil when body is not such an object.
func prefillBody(body []byte, text string) []byte {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return nil
	}
	var msgs []json.RawMessage
	if json.Unmarshal(obj["messages"], &msgs) != nil {
		return nil
	}
	m, err := json.Marshal(struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}{"assistant", text})
	if err != nil {
		return nil
	}
	msgs = append(msgs, m)
	if obj["messages"], err = json.Marshal(msgs); err != nil {
		return nil
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return nil
	}
	return out
}

// resume continues the body's call after its upstream read failed with err, as
// Client.Stream does (committed.continueCall). It reports whether a continuation is being
// read; when one was tried and failed, ferr is what the caller's read returns.
func (b *liveBody) resume(err error) (ok bool, ferr *Error) {
	c, cm := b.cont, b.cm
	if cm.closed.Load() {
		return false, nil
	}
	e := cm.finish(err)
	if e == nil || e.Class != failure.StreamInterrupted || errors.Is(e.Err, ErrStreamTimeout) ||
		c.acc.finish != finish.None || cm.finishReason.Load() != nil || c.link.ctx.Err() != nil {
		return false, nil
	}
	r, x := cm.r, cm.r.tx
	partial := c.acc.response()
	x.cont = true
	a, prefill, xerr, tried := cm.continueCall(c.link.ctx, e, partial, func(on bool) { x.setPrefill(on, partial) })
	x.cont = false
	if !tried {
		return false, nil
	}
	c.prior = addUsage(c.prior, cm.final)
	if xerr != nil {
		// The call ends here, with its event, whether or not the caller closed the body
		// meanwhile (then its read returns no error of the call's).
		fe := cm.failContinued(e, xerr, partial)
		if c.link.isClosed() {
			return false, nil
		}
		return false, fe
	}
	lb := x.live
	next := cm.c.commit(r, a, x.ps, x.actx, x.cancel, cm.caller, func() {}, true, nil, Usage{})
	x.live, x.resp = nil, nil
	c.link.mu.Lock()
	closed := c.link.closed
	if !closed {
		c.raws = append(c.raws, lb.raw) // closed with the body
	}
	c.link.mu.Unlock()
	if closed || !c.link.swap(next) {
		next.close()
		_ = lb.raw.Close()
		return false, nil
	}
	cm.cancel(context.Canceled)
	b.cm = next
	next.setBody(b)
	c.frec = lb.rec
	c.frec.buf = c.frec.buf[:0]
	c.pending, x.pend = x.pend, nil
	for i := range c.pending {
		next.note(&c.pending[i])
	}
	c.pendEnd = lb.endedEarly
	c.splice = nil
	if !prefill {
		c.splice = newSplicer(partial, &c.acc)
	}
	c.active = true
	return true, nil
}

// relay reads the continuation and encodes what the caller has not received yet, until
// there are bytes to deliver or the body ended (b.err).
func (b *liveBody) relay() {
	c := b.cont
	for len(c.out) == 0 && b.err == nil {
		var ch Chunk
		var err error
		if len(c.pending) > 0 {
			ch = c.pending[0]
			c.pending = c.pending[1:]
		} else if c.pendEnd {
			err = io.EOF // the attempt ended before its commit point
		} else {
			ch, err = b.cm.recv()
			c.frec.buf = c.frec.buf[:0] // its bytes are re-encoded, never delivered
		}
		if err != nil {
			b.relayEnd(err)
			return
		}
		if ch.KeepAlive {
			continue
		}
		if c.splice != nil {
			out, keep, serr := c.splice.filter(ch)
			if serr != nil {
				b.err = b.cm.divergeCall(serr.(*DivergedError), c.acc.response())
				return
			}
			if !keep {
				continue
			}
			ch = out
		}
		var usage *Usage
		if ch.Usage != nil {
			u := addUsage(c.prior, ch.Usage)
			usage = &u
		}
		c.acc.add(&ch)
		c.out = c.w.chunk(c.out, &ch, usage)
	}
}

// relayEnd ends the continuation's read with err (io.EOF: its end marker).
func (b *liveBody) relayEnd(err error) {
	c := b.cont
	if err == io.EOF {
		if c.splice != nil && c.splice.pending() {
			b.err = b.cm.divergeCall(c.splice.diverged(), c.acc.response())
			return
		}
		b.cm.finish(io.EOF)
		var usage *Usage
		if u := b.cm.final; u != nil && !u.Estimated || c.acc.usage != nil {
			s := addUsage(c.prior, b.cm.final)
			usage = &s
		}
		c.out = c.w.end(c.out, usage)
		b.err = io.EOF
		return
	}
	ok, ferr := b.resume(err)
	switch {
	case ok:
	case ferr != nil:
		b.err = ferr
	default:
		e := b.cm.finish(err)
		b.cm.releaseCall(nil)
		if e == nil {
			b.err = errBodyClosed
			return
		}
		b.err = e
	}
}

// newEventWriter returns the writer of a continuable shape's events.
func newEventWriter(shape dialect.Shape) eventWriter {
	if shape == shapeAnthropicMessages {
		return &anthropicWriter{open: -1}
	}
	return &openAIWriter{}
}

// openAIWriter writes chat.completion.chunk events. The first stream's first data event
// gives the id, created, model and system_fingerprint every written chunk repeats.
type openAIWriter struct {
	first []byte // the first stream's first data event, read at the first continuation
	head  struct {
		ID                string `json:"id"`
		Object            string `json:"object"`
		Created           int64  `json:"created"`
		Model             string `json:"model"`
		SystemFingerprint string `json:"system_fingerprint,omitempty"`
	}
	read bool
}

func (w *openAIWriter) event(ev []byte) {
	if w.first != nil {
		return
	}
	if data := eventData(ev); len(data) > 0 && data[0] == '{' {
		w.first = bytes.Clone(data)
	}
}

type oaiToolCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oaiDelta struct {
	Content   string        `json:"content,omitempty"`
	Reasoning string        `json:"reasoning_content,omitempty"`
	Refusal   string        `json:"refusal,omitempty"`
	ToolCalls []oaiToolCall `json:"tool_calls,omitempty"`
}

type oaiChoice struct {
	Index        int      `json:"index"`
	Delta        oaiDelta `json:"delta"`
	FinishReason *string  `json:"finish_reason"`
}

// oaiPromptDetails are usage.prompt_tokens_details: the prompt's tokens read from and
// written to the vendor's prompt cache.
type oaiPromptDetails struct {
	Cached     int `json:"cached_tokens"`
	CacheWrite int `json:"cache_write_tokens,omitempty"`
}

type oaiUsage struct {
	Prompt      int               `json:"prompt_tokens"`
	Completion  int               `json:"completion_tokens"`
	Total       int               `json:"total_tokens"`
	Prompt2     *oaiPromptDetails `json:"prompt_tokens_details,omitempty"`
	Completion2 *struct {
		Reasoning int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details,omitempty"`
}

type oaiChunk struct {
	ID                string      `json:"id"`
	Object            string      `json:"object"`
	Created           int64       `json:"created"`
	Model             string      `json:"model"`
	SystemFingerprint string      `json:"system_fingerprint,omitempty"`
	Choices           []oaiChoice `json:"choices"`
	Usage             *oaiUsage   `json:"usage,omitempty"`
}

func (w *openAIWriter) frame(out []byte, v oaiChunk) []byte {
	if !w.read {
		w.read = true
		_ = json.Unmarshal(w.first, &w.head) // a first event that is no chunk leaves the head empty
	}
	v.ID, v.Object, v.Created, v.Model, v.SystemFingerprint = w.head.ID, "chat.completion.chunk", w.head.Created,
		w.head.Model, w.head.SystemFingerprint
	data, err := json.Marshal(v)
	if err != nil {
		return out
	}
	out = append(out, "data: "...)
	out = append(out, data...)
	return append(out, "\n\n"...)
}

func (w *openAIWriter) chunk(out []byte, ch *Chunk, usage *Usage) []byte {
	if ch.HasContent() || ch.FinishReason != finish.None {
		c := oaiChoice{Delta: oaiDelta{Content: ch.Text, Reasoning: ch.Reasoning, Refusal: ch.Refusal}}
		for _, d := range ch.ToolCalls {
			tc := oaiToolCall{Index: d.Index, ID: d.ID}
			if d.ID != "" || d.Name != "" {
				tc.Type = "function"
			}
			tc.Function.Name, tc.Function.Arguments = d.Name, d.Arguments
			c.Delta.ToolCalls = append(c.Delta.ToolCalls, tc)
		}
		if ch.FinishReason != finish.None {
			f := ch.RawFinishReason
			if f == "" {
				f = string(ch.FinishReason)
			}
			c.FinishReason = &f
		}
		out = w.frame(out, oaiChunk{Choices: []oaiChoice{c}})
	}
	if usage != nil {
		u := &oaiUsage{Prompt: usage.InputTokens, Completion: usage.OutputTokens, Total: usage.TotalTokens}
		if u.Total == 0 {
			u.Total = satAdd(u.Prompt, u.Completion)
		}
		if usage.CachedInputTokens > 0 || usage.CacheWriteTokens > 0 {
			u.Prompt2 = &oaiPromptDetails{Cached: usage.CachedInputTokens, CacheWrite: usage.CacheWriteTokens}
		}
		if usage.ReasoningTokens > 0 {
			u.Completion2 = &struct {
				Reasoning int `json:"reasoning_tokens"`
			}{usage.ReasoningTokens}
		}
		out = w.frame(out, oaiChunk{Choices: []oaiChoice{}, Usage: u})
	}
	return out
}

// end writes [DONE]: the usage chunk went out when the fallback reported its usage.
func (w *openAIWriter) end(out []byte, _ *Usage) []byte {
	return append(out, "data: [DONE]\n\n"...)
}

// anthropicWriter writes Messages stream events. It follows the first stream's content
// blocks so that the continuation's go on where the caller's are: text into an open text
// block, a new block at the next index otherwise, no second message_start; finish and
// usage go into the one message_delta before message_stop.
type anthropicWriter struct {
	open     int    // the index of the open content block; -1: none
	openType string // its type: "text", "thinking" or "tool_use"
	next     int    // the index of the next block
	tools    map[int]int
	stop     string
}

func (w *anthropicWriter) event(ev []byte) {
	name := eventName(ev)
	switch name {
	case "content_block_start":
		var v struct {
			Index int `json:"index"`
			Block struct {
				Type string `json:"type"`
			} `json:"content_block"`
		}
		if json.Unmarshal(eventData(ev), &v) == nil {
			w.open, w.openType, w.next = v.Index, v.Block.Type, max(w.next, v.Index+1)
		}
	case "content_block_stop":
		w.open, w.openType = -1, ""
	}
}

func (w *anthropicWriter) write(out []byte, name string, v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		return out
	}
	out = append(out, "event: "...)
	out = append(out, name...)
	out = append(out, "\ndata: "...)
	out = append(out, data...)
	return append(out, "\n\n"...)
}

type antBlockEvent struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Block any    `json:"content_block,omitempty"`
	Delta any    `json:"delta,omitempty"`
}

// block makes a block of type typ the open one (index at: a new block when at < 0) and
// returns its index.
func (w *anthropicWriter) block(out []byte, typ string, at int, start any) ([]byte, int) {
	if w.open >= 0 && w.openType == typ && (at < 0 || at == w.open) {
		return out, w.open
	}
	out = w.closeBlock(out)
	if at < 0 {
		at = w.next
	}
	w.open, w.openType, w.next = at, typ, max(w.next, at+1)
	return w.write(out, "content_block_start", antBlockEvent{Type: "content_block_start", Index: at, Block: start}), at
}

func (w *anthropicWriter) closeBlock(out []byte) []byte {
	if w.open < 0 {
		return out
	}
	out = w.write(out, "content_block_stop", antBlockEvent{Type: "content_block_stop", Index: w.open})
	w.open, w.openType = -1, ""
	return out
}

func (w *anthropicWriter) chunk(out []byte, ch *Chunk, _ *Usage) []byte {
	var i int
	if ch.Reasoning != "" {
		out, i = w.block(out, "thinking", -1, map[string]string{"type": "thinking", "thinking": "", "signature": ""})
		out = w.write(out, "content_block_delta", antBlockEvent{Type: "content_block_delta", Index: i,
			Delta: map[string]string{"type": "thinking_delta", "thinking": ch.Reasoning}})
	}
	if ch.Text != "" {
		out, i = w.block(out, "text", -1, map[string]string{"type": "text", "text": ""})
		out = w.write(out, "content_block_delta", antBlockEvent{Type: "content_block_delta", Index: i,
			Delta: map[string]string{"type": "text_delta", "text": ch.Text}})
	}
	for _, d := range ch.ToolCalls {
		at, known := w.tools[d.Index]
		if !known {
			if d.ID == "" && d.Name == "" && w.open >= 0 && w.openType == "tool_use" {
				at = w.open // the spliced rest of the block the caller has open
			} else {
				at = -1
			}
		}
		out, i = w.block(out, "tool_use", at, map[string]any{"type": "tool_use", "id": d.ID, "name": d.Name,
			"input": struct{}{}})
		if w.tools == nil {
			w.tools = make(map[int]int)
		}
		w.tools[d.Index] = i
		if d.Arguments != "" {
			out = w.write(out, "content_block_delta", antBlockEvent{Type: "content_block_delta", Index: i,
				Delta: map[string]string{"type": "input_json_delta", "partial_json": d.Arguments}})
		}
	}
	if ch.FinishReason != finish.None {
		w.stop = ch.RawFinishReason
		if w.stop == "" {
			w.stop = string(ch.FinishReason)
		}
	}
	return out
}

func (w *anthropicWriter) end(out []byte, usage *Usage) []byte {
	out = w.closeBlock(out)
	var stop any
	if w.stop != "" {
		stop = w.stop
	}
	delta := map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}}
	if usage != nil {
		delta["usage"] = map[string]int{"input_tokens": usage.InputTokens, "output_tokens": usage.OutputTokens}
	} else {
		delta["usage"] = map[string]int{"output_tokens": 0}
	}
	data, _ := json.Marshal(delta)
	out = append(out, "event: message_delta\ndata: "...)
	out = append(out, data...)
	out = append(out, "\n\n"...)
	return append(out, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
}

// eventName returns the "event" field of one server-sent event's bytes.
func eventName(ev []byte) string {
	for line := range bytes.Lines(ev) {
		if v, ok := bytes.CutPrefix(line, []byte("event:")); ok {
			return string(bytes.TrimSpace(v))
		}
	}
	return ""
}

// eventData returns the first "data" field of one server-sent event's bytes.
func eventData(ev []byte) []byte {
	for line := range bytes.Lines(ev) {
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			return bytes.TrimSpace(v)
		}
	}
	return nil
}

// closeRaws closes the fallbacks' bodies.
func (c *txCont) closeRaws() {
	c.link.mu.Lock()
	raws := c.raws
	c.raws = nil
	c.link.mu.Unlock()
	for _, r := range raws {
		_ = r.Close()
	}
}
