package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"testing"

	"github.com/llmclient/llmclient"
)

// benchTokens are the content deltas the generated stream cycles through: short words, as
// real tokens are, with some JSON escapes and non-ASCII text among them.
var benchTokens = []string{
	" The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".",
	"\n\n", " It", " said", ": \"", "hello", "\"", " café", " naïve", " 🦊", " –", " and",
	" then", " ran", " away", ",", " fast", "!", "\t", " Done", " \\o/",
}

// openAIStream generates a Chat Completions event stream of n data events followed by
// data: [DONE], in the exact shape OpenAI sends with stream_options.include_usage:
//
//	event 1:        role chunk  {"id":…,"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}
//	events 2..n-2:  content chunks, delta {"content":TOKEN}, TOKEN cycling through benchTokens
//	event n-1:      finish chunk, delta {} and "finish_reason":"stop"
//	event n:        usage chunk, "choices":[] and a full usage object
//
// Every chunk carries "id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", "object",
// "created":1741569952, "model":"gpt-4o-2024-08-06", "service_tier":"default" and
// "system_fingerprint":"fp_eb9dce56a8"; each event is "data: {json}\n\n". For n = 20000 the
// stream is about 5.2 MB.
func openAIStream(n int) []byte {
	const head = `{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[`
	var b bytes.Buffer
	event := func(choices, usage string) {
		b.WriteString("data: ")
		b.WriteString(head)
		b.WriteString(choices)
		b.WriteString(`],"usage":`)
		b.WriteString(usage)
		b.WriteString("}\n\n")
	}
	event(`{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}`, "null")
	for i := 0; i < n-3; i++ {
		tok, _ := json.Marshal(benchTokens[i%len(benchTokens)])
		event(`{"index":0,"delta":{"content":`+string(tok)+`},"logprobs":null,"finish_reason":null}`, "null")
	}
	event(`{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}`, "null")
	b.WriteString("data: " + head + `],"usage":{"prompt_tokens":1117,"completion_tokens":` + strconv.Itoa(n-3) +
		`,"total_tokens":` + strconv.Itoa(n-3+1117) + `,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},` +
		`"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// benchChunk is the baseline's view of a chunk, decoded with encoding/json.
type benchChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Refusal          *string `json:"refusal"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

// baselineDecode is the common hand-rolled approach: bufio.Scanner over lines, "data: "
// prefix, encoding/json into a struct, mapped to Chunks. It returns the text length.
func baselineDecode(r io.Reader) (int, int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	text, events := 0, 0
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("data: ")) {
			continue
		}
		data := line[len("data: "):]
		if string(data) == "[DONE]" {
			return text, events, nil
		}
		var raw benchChunk
		if err := json.Unmarshal(data, &raw); err != nil {
			return text, events, err
		}
		c := llmclient.Chunk{ID: raw.ID, Model: raw.Model}
		if len(raw.Choices) > 0 {
			ch := &raw.Choices[0]
			if ch.Delta.Content != nil {
				c.Text = *ch.Delta.Content
			}
			if ch.FinishReason != nil {
				c.RawFinishReason = *ch.FinishReason
				c.FinishReason = normalizeFinishReason(c.RawFinishReason)
			}
		}
		if raw.Usage != nil {
			c.Usage = &llmclient.Usage{InputTokens: raw.Usage.PromptTokens, OutputTokens: raw.Usage.CompletionTokens, TotalTokens: raw.Usage.TotalTokens}
		}
		text += len(c.Text)
		events++
	}
	if err := sc.Err(); err != nil {
		return text, events, err
	}
	return text, events, io.ErrUnexpectedEOF
}

// chunkStreamDecode decodes with newChunkStream. It returns the text length and event count.
func chunkStreamDecode(r io.Reader) (int, int, error) {
	s := newChunkStream(&http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(r)})
	defer s.Close()
	text, events := 0, 0
	for {
		c, err := s.Recv()
		if err == io.EOF {
			return text, events, nil
		}
		if err != nil {
			return text, events, err
		}
		text += len(c.Text)
		events++
	}
}

// BenchmarkStreamDecode decodes a 20,000-chunk stream held in memory into Chunks, with the
// adapter's decoder and with the bufio.Scanner + encoding/json baseline, in the same run.
// Metrics: MB/s of event-stream text, allocs/event (heap allocations per data event).
func BenchmarkStreamDecode(b *testing.B) {
	const n = 20_000
	in := openAIStream(n)
	decoders := []struct {
		name   string
		decode func(io.Reader) (int, int, error)
	}{
		{"chunkStream", chunkStreamDecode},
		{"baseline_bufio_encodingjson", baselineDecode},
	}
	// Both decoders must agree before being timed.
	wantText, wantEvents, err := chunkStreamDecode(bytes.NewReader(in))
	if err != nil || wantEvents != n {
		b.Fatalf("chunkStream: %d events, %v", wantEvents, err)
	}
	for _, d := range decoders {
		b.Run(d.name, func(b *testing.B) {
			text, events, err := d.decode(bytes.NewReader(in))
			if err != nil || text != wantText || events != wantEvents {
				b.Fatalf("decoded %d bytes of text in %d events (%v), want %d in %d", text, events, err, wantText, wantEvents)
			}
			r := bytes.NewReader(in)
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for b.Loop() {
				r.Reset(in)
				if _, _, err := d.decode(r); err != nil {
					b.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N*n), "allocs/event")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
		})
	}
}

// TestOpenAIStreamGenerator pins the generator's shape, so that benchmark numbers from
// different runs (and the nested-module SDK comparison) decode the same input.
func TestOpenAIStreamGenerator(t *testing.T) {
	in := openAIStream(20_000)
	if got := bytes.Count(in, []byte("\n\ndata: ")) + 1; got != 20_001 {
		t.Fatalf("%d events, want 20000 + [DONE]", got)
	}
	text, events, err := chunkStreamDecode(bytes.NewReader(in))
	if err != nil || events != 20_000 {
		t.Fatalf("%d chunks, %v", events, err)
	}
	bt, be, err := baselineDecode(bytes.NewReader(in))
	if err != nil || bt != text || be != events {
		t.Fatalf("baseline %d/%d, %v; chunkStream %d/%d", bt, be, err, text, events)
	}
	t.Log(fmt.Sprintf("stream: %d bytes, %d events, %d bytes of text", len(in), events, text))
}
