package cache

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/finish"
)

// codecVersion is the version of the encoding MarshalEntry writes.
const codecVersion = 1

// MaxEncodedEntry bounds what UnmarshalEntry accepts: larger input is refused before it
// is parsed, whatever a shared store holds.
const MaxEncodedEntry = 64 << 20

// ErrCorruptEntry is wrapped by UnmarshalEntry's errors: the bytes are not an entry this
// version can read. A store treats such an entry as a miss.
var ErrCorruptEntry = errors.New("llmclient/cache: corrupt cache entry")

// wireEntry is the stored form of an Entry: JSON with short names.
type wireEntry struct {
	V           int         `json:"v"`
	Created     int64       `json:"t"` // Unix nanoseconds
	Fingerprint string      `json:"f,omitempty"`
	Response    wireResp    `json:"r"`
	Chunks      []wireChunk `json:"c,omitempty"`
	Streamed    bool        `json:"s,omitempty"` // Chunks is not nil (it may be empty)
}

type wireResp struct {
	ID              string         `json:"id,omitempty"`
	Model           string         `json:"m,omitempty"`
	Text            string         `json:"x,omitempty"`
	Reasoning       string         `json:"rs,omitempty"`
	ToolCalls       []wireToolCall `json:"tc,omitempty"`
	FinishReason    string         `json:"fr,omitempty"`
	RawFinishReason string         `json:"rf,omitempty"`
	Refusal         string         `json:"rx,omitempty"`
	Usage           wireUsage      `json:"u"`
	Status          int            `json:"st,omitempty"`
	Upstream        string         `json:"up,omitempty"`
	Fallback        bool           `json:"fb,omitempty"`
}

type wireToolCall struct {
	ID        string `json:"id,omitempty"`
	Name      string `json:"n,omitempty"`
	Arguments string `json:"a,omitempty"`
}

type wireUsage struct {
	In        int  `json:"i,omitempty"`
	Out       int  `json:"o,omitempty"`
	Total     int  `json:"t,omitempty"`
	Cached    int  `json:"c,omitempty"`
	Write     int  `json:"w,omitempty"`
	Reasoning int  `json:"r,omitempty"`
	Estimated bool `json:"e,omitempty"`
}

type wireChunk struct {
	Text            string          `json:"x,omitempty"`
	Reasoning       string          `json:"rs,omitempty"`
	ToolCalls       []wireToolDelta `json:"tc,omitempty"`
	FinishReason    string          `json:"fr,omitempty"`
	RawFinishReason string          `json:"rf,omitempty"`
	Refusal         string          `json:"rx,omitempty"`
	Usage           *wireUsage      `json:"u,omitempty"`
	ID              string          `json:"id,omitempty"`
	Model           string          `json:"m,omitempty"`
}

type wireToolDelta struct {
	Index     int    `json:"i"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"n,omitempty"`
	Arguments string `json:"a,omitempty"`
}

// MarshalEntry encodes e for a store that keeps bytes (see UnmarshalEntry). It refuses
// an entry that UnmarshalEntry would refuse for its number of chunks and tool calls.
func MarshalEntry(e *Entry) ([]byte, error) {
	n := len(e.Response.ToolCalls) + len(e.Chunks)
	for i := range e.Chunks {
		n += len(e.Chunks[i].ToolCalls)
	}
	if n > maxEncodedElements {
		return nil, fmt.Errorf("llmclient/cache: entry of %d chunks and tool calls, more than %d", n, maxEncodedElements)
	}
	w := wireEntry{V: codecVersion, Created: e.Created.UnixNano(), Fingerprint: e.Fingerprint,
		Response: toWireResp(&e.Response), Streamed: e.Chunks != nil}
	if len(e.Chunks) > 0 {
		w.Chunks = make([]wireChunk, len(e.Chunks))
		for i := range e.Chunks {
			w.Chunks[i] = toWireChunk(&e.Chunks[i])
		}
	}
	return json.Marshal(&w)
}

// UnmarshalEntry decodes what MarshalEntry wrote. Input that is larger than
// MaxEncodedEntry, holds more chunks and tool calls in all than MaxEncodedEntry bytes
// would hold at 160 bytes each (Entry.Size's cost of a chunk: what a decoded chunk
// takes), is not such an encoding, or was written by another version is refused with an
// error wrapping ErrCorruptEntry, before it is decoded; it never panics. So the memory
// an entry takes once decoded stays within a small multiple of MaxEncodedEntry,
// whatever a shared store holds.
func UnmarshalEntry(data []byte) (*Entry, error) {
	if len(data) > MaxEncodedEntry {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrCorruptEntry, len(data), MaxEncodedEntry)
	}
	if err := checkElements(data); err != nil {
		return nil, err
	}
	var w wireEntry
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptEntry, err)
	}
	if w.V != codecVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrCorruptEntry, w.V, codecVersion)
	}
	e := &Entry{Created: time.Unix(0, w.Created), Fingerprint: w.Fingerprint, Response: fromWireResp(&w.Response)}
	if w.Streamed || len(w.Chunks) > 0 {
		e.Chunks = make([]llmclient.Chunk, len(w.Chunks))
		for i := range w.Chunks {
			e.Chunks[i] = fromWireChunk(&w.Chunks[i])
		}
	}
	return e, nil
}

func toWireResp(r *llmclient.Response) wireResp {
	w := wireResp{ID: r.ID, Model: r.Model, Text: r.Text, Reasoning: r.Reasoning,
		FinishReason: string(r.FinishReason), RawFinishReason: r.RawFinishReason, Refusal: r.Refusal,
		Usage: toWireUsage(&r.Usage), Status: r.Status, Upstream: r.Upstream, Fallback: r.Fallback}
	for _, tc := range r.ToolCalls {
		w.ToolCalls = append(w.ToolCalls, wireToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	}
	return w
}

func fromWireResp(w *wireResp) llmclient.Response {
	r := llmclient.Response{ID: w.ID, Model: w.Model, Text: w.Text, Reasoning: w.Reasoning,
		FinishReason: finish.Reason(w.FinishReason), RawFinishReason: w.RawFinishReason,
		Refusal: w.Refusal, Usage: fromWireUsage(&w.Usage), Status: w.Status, Upstream: w.Upstream,
		Fallback: w.Fallback}
	for _, tc := range w.ToolCalls {
		r.ToolCalls = append(r.ToolCalls, llmclient.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	}
	return r
}

func toWireUsage(u *llmclient.Usage) wireUsage {
	return wireUsage{In: u.InputTokens, Out: u.OutputTokens, Total: u.TotalTokens, Cached: u.CachedInputTokens,
		Write: u.CacheWriteTokens, Reasoning: u.ReasoningTokens, Estimated: u.Estimated}
}

func fromWireUsage(w *wireUsage) llmclient.Usage {
	return llmclient.Usage{InputTokens: w.In, OutputTokens: w.Out, TotalTokens: w.Total, CachedInputTokens: w.Cached,
		CacheWriteTokens: w.Write, ReasoningTokens: w.Reasoning, Estimated: w.Estimated}
}

func toWireChunk(c *llmclient.Chunk) wireChunk {
	w := wireChunk{Text: c.Text, Reasoning: c.Reasoning, FinishReason: string(c.FinishReason),
		RawFinishReason: c.RawFinishReason, Refusal: c.Refusal, ID: c.ID, Model: c.Model}
	if c.Usage != nil {
		u := toWireUsage(c.Usage)
		w.Usage = &u
	}
	for _, d := range c.ToolCalls {
		w.ToolCalls = append(w.ToolCalls, wireToolDelta{Index: d.Index, ID: d.ID, Name: d.Name, Arguments: d.Arguments})
	}
	return w
}

func fromWireChunk(w *wireChunk) llmclient.Chunk {
	c := llmclient.Chunk{Text: w.Text, Reasoning: w.Reasoning, FinishReason: finish.Reason(w.FinishReason),
		RawFinishReason: w.RawFinishReason, Refusal: w.Refusal, ID: w.ID, Model: w.Model}
	if w.Usage != nil {
		u := fromWireUsage(w.Usage)
		c.Usage = &u
	}
	for _, d := range w.ToolCalls {
		c.ToolCalls = append(c.ToolCalls, dialect.ToolCallDelta{Index: d.Index, ID: d.ID, Name: d.Name, Arguments: d.Arguments})
	}
	return c
}
