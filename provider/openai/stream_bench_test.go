package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/openai/openaitest"
)

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
	in := openaitest.ChatStream(n)
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
	in := openaitest.ChatStream(20_000)
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
