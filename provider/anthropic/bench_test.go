package anthropic

import (
	"net/http"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/providertest"
)

// BenchmarkStream measures parsing a 200-delta text stream; allocations are per stream.
func BenchmarkStream(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n")
	sb.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	for range 200 {
		sb.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" hello world\"}}\n\n")
	}
	sb.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	sb.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":400}}\n\n")
	sb.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	providertest.BenchStream(b, []byte(sb.String()), http.Header{}, func(resp *http.Response) llmclient.ProviderStream {
		return newStream(resp, func() {}, "")
	})
}

// BenchmarkBuildBody measures encoding a ten-turn request with a tool.
func BenchmarkBuildBody(b *testing.B) {
	req := providertest.Conversation()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := buildBody(req, "claude", DefaultMaxTokens, false, nil); err != nil {
			b.Fatal(err)
		}
	}
}
