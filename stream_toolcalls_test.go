package llmclient_test

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/provider/fake"
)

// Parallel tool calls whose deltas interleave (index 0, 1, 2, then 0 again) assemble by
// index. Before, the third call's arrival moved the first two in memory with their
// argument builders, and the next delta for call 0 panicked in the caller's goroutine
// ("strings: illegal use of non-zero Builder copied by value").
func TestStreamInterleavedToolCalls(t *testing.T) {
	delta := func(ix int, id, name, args string) llmclient.Chunk {
		return llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: ix, ID: id, Name: name, Arguments: args}}}
	}
	p := fake.New(fake.StreamChunks(
		delta(0, "c0", "get_weather", `{"city":`),
		delta(1, "c1", "get_time", `{"tz":`),
		delta(2, "c2", "get_news", `{}`),
		delta(0, "", "", `"Oslo"}`),
		delta(1, "", "", `"CET"}`),
		llmclient.Chunk{FinishReason: finish.ToolCalls},
	))
	c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p}))
	s, err := c.Stream(context.Background(), chatReq("m"))
	require.NoError(t, err)
	defer s.Close()
	for s.Next() {
	}
	require.NoError(t, s.Err())
	assert.Equal(t, []llmclient.ToolCall{
		{ID: "c0", Name: "get_weather", Arguments: `{"city":"Oslo"}`},
		{ID: "c1", Name: "get_time", Arguments: `{"tz":"CET"}`},
		{ID: "c2", Name: "get_news", Arguments: `{}`},
	}, s.Response().ToolCalls)
}

// toolDelta is a chat.completion.chunk event whose delta is one tool call's: tc is its
// JSON, such as {"index":3} or {"index":3,"id":"c3","function":{"name":"f"}}.
func toolDelta(tc string) string {
	return `data: {"id":"s1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[` +
		tc + `]},"finish_reason":null}]}` + "\n\n"
}

// emptyToolDeltas is a text chunk, then n tool-call deltas that carry nothing (no id, name
// or arguments), each at a new index.
func emptyToolDeltas(n int) string {
	var b strings.Builder
	b.WriteString(roleChunk + chunk("Hi"))
	for i := range n {
		b.WriteString(toolDelta(`{"index":` + strconv.Itoa(i) + `}`))
	}
	return b.String()
}

// toolDeltasEnd gives content to two of the indexes emptyToolDeltas sent, interleaved,
// then ends the stream.
const toolDeltasEnd = `data: {"id":"s1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"id":"c3","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]},"finish_reason":null}]}` + "\n\n" +
	`data: {"id":"s1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":7,"id":"c7","type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":null}]}` + "\n\n" +
	`data: {"id":"s1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"function":{"arguments":"1}"}}]},"finish_reason":null}]}` + "\n\n" +
	`data: {"id":"s1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n" +
	done

// heldSSE streams head, then waits for release (or the client to go), then streams tail.
func heldSSE(head string, release <-chan struct{}, tail string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		if _, err := io.WriteString(w, head); err != nil {
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, tail)
	}
}

// heapNow is the live heap after a collection.
func heapNow() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// Tool-call deltas that carry nothing, each at a new index, cost a stream nothing: it
// keeps the output it delivered, and no call per index. An index that later gets
// content is a call from then on, in the order the calls got theirs.
func TestStreamEmptyToolCallDeltasKeepNothing(t *testing.T) {
	const n = 200_000
	head := emptyToolDeltas(n)
	release := make(chan struct{})
	c := newClient(t, openaiOver(t, "oai", heldSSE(head, release, toolDeltasEnd)))
	before := heapNow()
	s, err := c.Stream(context.Background(), &llmclient.Request{Model: "gpt-4o",
		Messages: []llmclient.Message{llmclient.UserMessage("hi")}})
	require.NoError(t, err)
	defer s.Close()
	read := 0
	for read < n+1 && s.Next() {
		if ch := s.Current(); ch.Text != "" || len(ch.ToolCalls) > 0 { // HasContent is false for an empty delta
			read++
		}
	}
	require.Equal(t, n+1, read, "the text and every delta delivered: %v", s.Err())
	grown := heapNow() - before
	// A call kept per index was over 20 MiB here; the stream itself holds tens of kB.
	assert.Less(t, grown, int64(1<<20), "the open stream holds %d bytes after %d empty deltas", grown, n)
	close(release)
	for s.Next() {
	}
	require.NoError(t, s.Err())
	resp := s.Response()
	assert.Equal(t, "Hi", resp.Text)
	assert.Equal(t, []llmclient.ToolCall{{ID: "c3", Name: "f", Arguments: `{"a":1}`}, {ID: "c7", Name: "g", Arguments: `{}`}},
		resp.ToolCalls)
	assert.Equal(t, finish.ToolCalls, resp.FinishReason)
	runtime.KeepAlive(head)
}

// The same holds for a Transport's stream, whose body keeps what the caller received to
// continue it (WithStreamContinuation): the caller reads the upstream's bytes unchanged.
func TestTransportEmptyToolCallDeltasKeepNothing(t *testing.T) {
	const n = 200_000
	head := emptyToolDeltas(n)
	release := make(chan struct{})
	up := newScript(heldSSE(head, release, toolDeltasEnd))
	c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"))
	rt := c.Transport(memTransport{up})
	before := heapNow()
	resp, err := post(t, context.Background(), rt, "http://oai.test/v1/chat/completions", streamBody)
	require.NoError(t, err)
	defer resp.Body.Close()
	got := make([]byte, len(head))
	_, err = io.ReadFull(resp.Body, got)
	require.NoError(t, err)
	grown := heapNow() - before - int64(len(got))
	// A call kept per index was over 20 MiB here; the stream itself holds tens of kB.
	assert.Less(t, grown, int64(1<<20), "the open body holds %d bytes after %d empty deltas", grown, n)
	assert.Equal(t, head, string(got))
	close(release)
	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, toolDeltasEnd, string(rest))
	runtime.KeepAlive(got)
}

// A restart spliced after a break (WithStreamContinuation) holds nothing per index of its
// tool-call deltas that carry nothing either.
func TestContinuationEmptyToolCallDeltasKeepNothing(t *testing.T) {
	const n = 200_000
	head := emptyToolDeltas(n)
	release, written := make(chan struct{}), make(chan struct{})
	a := newScript(sseStep(ev{0, roleChunk}, ev{0, chunk("Hi")})) // then the connection ends
	held := heldSSE(head, release, toolDeltasEnd)
	b := newScript(func(w http.ResponseWriter, r *http.Request) {
		held(noticeWrite{w, head, written}, r)
	})
	c := newClient(t, openaiOver(t, "a", a), openaiOver(t, "b", b), llmclient.WithModelGroup("gpt-4o", "a", "b"))
	before := heapNow()
	s, err := c.Stream(context.Background(), &llmclient.Request{Model: "gpt-4o",
		Messages: []llmclient.Message{llmclient.UserMessage("hi")}})
	require.NoError(t, err)
	defer s.Close()
	read := make(chan string)
	go func() {
		var text string
		for s.Next() {
			text += s.Current().Text
		}
		read <- text
	}()
	<-written // the stream read the restart's deltas (a pipe's write returns once read)
	grown := heapNow() - before
	// A splice's entry per index was over 4 MiB here; the stream itself holds tens of kB.
	assert.Less(t, grown, int64(1<<20), "the open stream holds %d bytes after a restart's %d empty deltas", grown, n)
	close(release)
	assert.Equal(t, "Hi", <-read, "the delivered text, not repeated")
	require.NoError(t, s.Err())
	require.Equal(t, 1, b.count())
	resp := s.Response()
	assert.Equal(t, "Hi", resp.Text)
	assert.Equal(t, []llmclient.ToolCall{{ID: "c3", Name: "f", Arguments: `{"a":1}`}, {ID: "c7", Name: "g", Arguments: `{}`}},
		resp.ToolCalls)
	runtime.KeepAlive(head)
}

// noticeWrite closes written once head was written through it.
type noticeWrite struct {
	http.ResponseWriter
	head    string
	written chan struct{}
}

func (w noticeWrite) WriteString(s string) (int, error) {
	n, err := io.WriteString(w.ResponseWriter, s)
	if s == w.head {
		close(w.written)
	}
	return n, err
}
