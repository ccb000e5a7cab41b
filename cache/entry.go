package cache

import (
	"slices"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/pricing"
)

// Entry is one stored answer: a response, and the chunks of the stream it came from when
// it was streamed. Stores hold Entries; a Store returns them to the cache, which never
// modifies them and copies what it hands to callers.
type Entry struct {
	// Response is the answer as the caller received it, without its Attempts,
	// RateLimits and Cost, which belong to the call that produced it (and with Cached
	// false: the cache marks the copies it serves, which cost a known $0).
	Response llmclient.Response
	// Chunks are the chunks of the stream, in the order the caller read them; nil when
	// the answer came from Complete. A Stream served from the entry replays them one by
	// one; a Stream served from an entry without them gets the whole answer as one chunk.
	Chunks []llmclient.Chunk
	// Created is when the answer arrived.
	Created time.Time
	// Fingerprint identifies the request that produced the entry, for entries stored
	// under an idempotency key, whose own key does not say what was asked; "" for an
	// answer stored without one. It hashes what the exact key hashes but the namespace,
	// the partition (both in the idempotency key) and the configuration of the key
	// metadata, in parts compared apart: across a deploy that changes WithKeyMetadata or
	// the key's encoding, the retry of a request replays its record or, when the two
	// builds cannot be compared, misses it; it is never refused as another request.
	// Records of builds that stored the exact key here still match that key.
	Fingerprint string
}

// Size estimates the memory e holds, in bytes: its strings and slices plus a fixed
// overhead per entry and per chunk. The memory store bounds its entries by it.
func (e *Entry) Size() int {
	n := entryOverhead + responseSize(&e.Response) + len(e.Fingerprint)
	for i := range e.Chunks {
		n += chunkSize(&e.Chunks[i])
	}
	return n
}

const (
	entryOverhead = 512
	chunkOverhead = 160
)

func responseSize(r *llmclient.Response) int {
	n := len(r.ID) + len(r.Model) + len(r.Text) + len(r.Reasoning) + len(r.RawFinishReason) +
		len(r.Refusal) + len(r.Upstream) + len(r.FinishReason)
	for _, tc := range r.ToolCalls {
		n += 48 + len(tc.ID) + len(tc.Name) + len(tc.Arguments)
	}
	return n
}

func chunkSize(c *llmclient.Chunk) int {
	n := chunkOverhead + len(c.Text) + len(c.Reasoning) + len(c.RawFinishReason) + len(c.Refusal) +
		len(c.ID) + len(c.Model) + len(c.FinishReason)
	if c.Usage != nil {
		n += 64
	}
	for _, d := range c.ToolCalls {
		n += 48 + len(d.ID) + len(d.Name) + len(d.Arguments)
	}
	return n
}

// newEntry makes the entry of an answer: the response without what belongs to its call
// (Attempts, RateLimits, Cost). It copies the fields one by one rather than the whole
// Response, which would also keep the call's trace held inside it. A stream's Response
// holds no content when the Client keeps none (llmclient.WithStreamAccumulate(false)):
// the content is then assembled from the recorded chunks, so that the entry holds the
// answer the caller read, for a Complete served from it as much as for a Stream.
func newEntry(resp *llmclient.Response, chunks []llmclient.Chunk, now time.Time) *Entry {
	text, reasoning, refusal, calls := resp.Text, resp.Reasoning, resp.Refusal, resp.ToolCalls
	if !hasContent(resp) && chunksHaveContent(chunks) {
		acc := llmclient.StreamOf(chunks, nil).Response() // assembles; reads nothing
		text, reasoning, refusal, calls = acc.Text, acc.Reasoning, acc.Refusal, acc.ToolCalls
	}
	return &Entry{Chunks: chunks, Created: now, Response: llmclient.Response{
		ID: resp.ID, Model: resp.Model, Text: text, Reasoning: reasoning,
		ToolCalls: slices.Clone(calls), FinishReason: resp.FinishReason,
		RawFinishReason: resp.RawFinishReason, Refusal: refusal, Usage: resp.Usage,
		Status: resp.Status, Upstream: resp.Upstream, Fallback: resp.Fallback, Degraded: resp.Degraded,
	}}
}

// hasContent reports whether r holds any content: text, reasoning, a refusal or a tool
// call.
func hasContent(r *llmclient.Response) bool {
	return r.Text != "" || r.Reasoning != "" || r.Refusal != "" || len(r.ToolCalls) > 0
}

// chunksHaveContent reports whether any of chunks carries content.
func chunksHaveContent(chunks []llmclient.Chunk) bool {
	for i := range chunks {
		if chunks[i].HasContent() {
			return true
		}
	}
	return false
}

// response returns a copy of the entry's response for one caller, who may modify it,
// marked Cached: no upstream call was made for it, so it cost a known $0, and no
// failover served it (Fallback false, whatever the stored call did).
func (e *Entry) response() *llmclient.Response {
	r := e.Response
	r.Cached, r.Fallback = true, false
	r.Cost = pricing.Cost{Known: true}
	r.ToolCalls = slices.Clone(r.ToolCalls)
	return &r
}

// stream returns a Stream that replays the entry for one caller.
func (e *Entry) stream() *llmclient.Stream {
	resp := e.response()
	if e.Chunks == nil {
		return llmclient.StreamOf([]llmclient.Chunk{wholeChunk(resp)}, resp)
	}
	chunks := make([]llmclient.Chunk, len(e.Chunks))
	for i, c := range e.Chunks {
		chunks[i] = cloneChunk(c)
	}
	return llmclient.StreamOf(chunks, resp)
}

// wholeChunk delivers a whole response as one chunk.
func wholeChunk(r *llmclient.Response) llmclient.Chunk {
	u := r.Usage
	ch := llmclient.Chunk{Text: r.Text, Reasoning: r.Reasoning, Refusal: r.Refusal, FinishReason: r.FinishReason,
		RawFinishReason: r.RawFinishReason, ID: r.ID, Model: r.Model, Usage: &u}
	for i, tc := range r.ToolCalls {
		ch.ToolCalls = append(ch.ToolCalls, dialect.ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	}
	return ch
}

// cloneChunk copies what a reader of the chunk could modify.
func cloneChunk(c llmclient.Chunk) llmclient.Chunk {
	c.ToolCalls = slices.Clone(c.ToolCalls)
	if c.Usage != nil {
		u := *c.Usage
		c.Usage = &u
	}
	return c
}

// storable reports whether an answer may be stored: a successful, non-degraded answer
// that the vendor did not filter or refuse (a filter or a refusal can depend on more than
// the request, and a later call may well be answered).
func storable(resp *llmclient.Response) bool {
	if resp == nil || resp.Degraded {
		return false
	}
	switch resp.FinishReason {
	case finish.ContentFilter, finish.Refusal:
		return false
	}
	return resp.Refusal == ""
}
