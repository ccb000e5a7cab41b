package cache_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/finish"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sampleEntry() *cache.Entry {
	u := llmclient.Usage{InputTokens: 9, OutputTokens: 4, TotalTokens: 13, CachedInputTokens: 2, CacheWriteTokens: 1, ReasoningTokens: 3}
	return &cache.Entry{
		Response: llmclient.Response{ID: "id1", Model: "m-1", Text: "Hello", Reasoning: "hm",
			ToolCalls:    []llmclient.ToolCall{{ID: "t1", Name: "f", Arguments: `{"a":1}`}},
			FinishReason: finish.ToolCalls, RawFinishReason: "tool_use", Usage: u, Status: 200,
			Upstream: "a", Fallback: true},
		Chunks: []llmclient.Chunk{{Reasoning: "hm", ID: "id1", Model: "m-1"}, {Text: "Hel"},
			{ToolCalls: []dialect.ToolCallDelta{{Index: 0, ID: "t1", Name: "f", Arguments: `{"a":1}`}}},
			{Text: "lo", FinishReason: finish.ToolCalls, RawFinishReason: "tool_use", Usage: &u}},
		Created:     time.Unix(1700000000, 123456789),
		Fingerprint: "xabc",
	}
}

func TestEntryCodecRoundTrip(t *testing.T) {
	for name, e := range map[string]*cache.Entry{
		"stream":       sampleEntry(),
		"one-shot":     {Response: llmclient.Response{Text: "x"}, Created: time.Unix(1, 0)},
		"empty stream": {Response: llmclient.Response{Text: ""}, Chunks: []llmclient.Chunk{}, Created: time.Unix(2, 0)},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := cache.MarshalEntry(e)
			require.NoError(t, err)
			got, err := cache.UnmarshalEntry(b)
			require.NoError(t, err)
			assert.Equal(t, e.Created.UnixNano(), got.Created.UnixNano())
			got.Created = e.Created
			assert.Equal(t, e, got)
		})
	}
}

func TestEntryCodecRefusesBadInput(t *testing.T) {
	for name, in := range map[string]string{
		"empty":       "",
		"not json":    "nope",
		"old version": `{"v":0,"r":{"u":{}}}`,
		"new version": `{"v":2,"r":{"u":{}}}`,
		"wrong types": `{"v":1,"r":{"x":5}}`,
	} {
		_, err := cache.UnmarshalEntry([]byte(in))
		assert.ErrorIs(t, err, cache.ErrCorruptEntry, name)
	}
	_, err := cache.UnmarshalEntry(make([]byte, cache.MaxEncodedEntry+1))
	assert.ErrorIs(t, err, cache.ErrCorruptEntry)
}

// FuzzUnmarshalEntry: any bytes decode to an entry or an ErrCorruptEntry error, never a
// panic; what decodes re-encodes to an entry that decodes the same.
func FuzzUnmarshalEntry(f *testing.F) {
	b, _ := cache.MarshalEntry(sampleEntry())
	f.Add(b)
	f.Add([]byte(`{"v":1,"r":{"u":{}},"s":true}`))
	f.Add([]byte(`{"v":1,"t":-1,"r":{"tc":[{}],"u":{"i":-5}},"c":[{"u":{},"tc":[{"i":-1}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := cache.UnmarshalEntry(data)
		if err != nil {
			assert.ErrorIs(t, err, cache.ErrCorruptEntry)
			return
		}
		again, err := cache.MarshalEntry(e)
		require.NoError(t, err)
		e2, err := cache.UnmarshalEntry(again)
		require.NoError(t, err)
		assert.Equal(t, e, e2)
		_ = e.Size()
	})
}

// encodedChunks is an encoded entry whose chunks array holds n copies of elem.
func encodedChunks(elem string, n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"v":1,"r":{"u":{}},"s":true,"c":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(elem)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// Input within MaxEncodedEntry may still hold millions of chunks of two bytes each, which
// would take gigabytes once decoded (4 MiB of "{}," took 1.2 GB): it is refused before it
// is decoded, however its elements are written. An entry of as many chunks as fit in
// MaxEncodedEntry at Entry.Size's cost of a chunk decodes.
func TestEntryCodecRefusesTooManyElements(t *testing.T) {
	const limit = cache.MaxEncodedEntry / 160
	for name, data := range map[string][]byte{
		"empty chunks":                encodedChunks(`{}`, limit+1),
		"null chunks":                 encodedChunks(`null`, limit+1),
		"spaced":                      encodedChunks(" \n{ } ", limit+1),
		"escaped key":                 bytes.Replace(encodedChunks(`{}`, limit+1), []byte(`"c":`), []byte(`"\u0063":`), 1),
		"tool deltas in one chunk":    encodedChunks(`{"tc":[`+strings.Repeat(`{},`, limit)+`{}]}`, 1),
		"tool calls of the response":  []byte(`{"v":1,"r":{"u":{},"tc":[` + strings.Repeat(`{},`, limit) + `{}]}}`),
		"deeper than encoding/json's": []byte(strings.Repeat("[", 10001) + strings.Repeat("]", 10001)),
	} {
		require.Less(t, len(data), cache.MaxEncodedEntry, name)
		_, err := cache.UnmarshalEntry(data)
		assert.ErrorIs(t, err, cache.ErrCorruptEntry, name)
	}
	e, err := cache.UnmarshalEntry(encodedChunks(`{}`, limit))
	require.NoError(t, err)
	assert.Len(t, e.Chunks, limit)
	// Strings hold brackets and commas of their own.
	e, err = cache.UnmarshalEntry(encodedChunks(`{"x":"[,,,{\"[,"}`, 10))
	require.NoError(t, err)
	assert.Len(t, e.Chunks, 10)
	assert.Equal(t, `[,,,{"[,`, e.Chunks[0].Text)

	// What would not decode is not encoded.
	big := &cache.Entry{Chunks: make([]llmclient.Chunk, limit+1)}
	_, err = cache.MarshalEntry(big)
	assert.Error(t, err)
	big.Chunks = big.Chunks[:1]
	big.Chunks[0].ToolCalls = make([]dialect.ToolCallDelta, limit)
	_, err = cache.MarshalEntry(big)
	assert.Error(t, err, "tool calls count too")
}
