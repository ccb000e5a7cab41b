package gemini

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
)

// BenchmarkStream measures parsing a 200-chunk text stream; allocations are per stream.
func BenchmarkStream(b *testing.B) {
	var sb strings.Builder
	for range 199 {
		sb.WriteString(`data: {"candidates": [{"content": {"parts": [{"text": " hello world"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 8,"candidatesTokenCount": 3,"totalTokenCount": 11},"modelVersion": "gemini-2.5-flash","responseId": "r-1"}` + "\n\n")
	}
	sb.WriteString(`data: {"candidates": [{"content": {"parts": [{"text": "."}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 8,"candidatesTokenCount": 400,"totalTokenCount": 408},"modelVersion": "gemini-2.5-flash","responseId": "r-1"}`)
	body := []byte(sb.String())
	h := http.Header{"Content-Type": {"text/event-stream"}}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		s := newStream(&http.Response{StatusCode: 200, Body: io.NopCloser(bytes.NewReader(body)), Header: h}, func() {}, "")
		for {
			if _, err := s.Recv(); err != nil {
				if err != io.EOF {
					b.Fatal(err)
				}
				break
			}
		}
	}
}

// BenchmarkBuildBody measures encoding a ten-turn request with a tool.
func BenchmarkBuildBody(b *testing.B) {
	req := &llmclient.Request{Tools: []llmclient.Tool{{Name: "f", Description: "d", Parameters: []byte(`{"type":"object"}`)}}}
	req.Messages = append(req.Messages, llmclient.SystemMessage("You are terse."))
	for range 5 {
		req.Messages = append(req.Messages, llmclient.UserMessage(strings.Repeat("question ", 50)), llmclient.AssistantMessage(strings.Repeat("answer ", 50)))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := buildBody(req); err != nil {
			b.Fatal(err)
		}
	}
}
