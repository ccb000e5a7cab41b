package gemini

import (
	"net/http"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/providertest"
)

// BenchmarkStream measures parsing a 200-chunk text stream; allocations are per stream.
func BenchmarkStream(b *testing.B) {
	var sb strings.Builder
	for range 199 {
		sb.WriteString(`data: {"candidates": [{"content": {"parts": [{"text": " hello world"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 8,"candidatesTokenCount": 3,"totalTokenCount": 11},"modelVersion": "gemini-2.5-flash","responseId": "r-1"}` + "\n\n")
	}
	sb.WriteString(`data: {"candidates": [{"content": {"parts": [{"text": "."}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 8,"candidatesTokenCount": 400,"totalTokenCount": 408},"modelVersion": "gemini-2.5-flash","responseId": "r-1"}`)
	h := http.Header{"Content-Type": {"text/event-stream"}}
	providertest.BenchStream(b, []byte(sb.String()), h, func(resp *http.Response) llmclient.ProviderStream {
		return newStream(resp, func() {}, "")
	})
}

// BenchmarkBuildBody measures encoding a ten-turn request with a tool.
func BenchmarkBuildBody(b *testing.B) {
	req := providertest.Conversation()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := buildBody(req, nil); err != nil {
			b.Fatal(err)
		}
	}
}
