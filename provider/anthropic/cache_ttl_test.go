package anthropic_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/providertest"
)

// TestCacheWriteOneHour: the usage's cache_creation breakdown (docs.anthropic.com
// Messages API, Usage.cache_creation) gives the one-hour cache writes apart, in one-shot
// responses and in a stream's message_start, as Usage.CacheWrite1hTokens; a breakdown
// larger than the writes is cut to them.
func TestCacheWriteOneHour(t *testing.T) {
	for _, tc := range []struct {
		usage  string
		want1h int
	}{
		{`"cache_creation_input_tokens": 3000, "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 2000}`, 2000},
		{`"cache_creation_input_tokens": 3000, "cache_creation": null`, 0},
		{`"cache_creation_input_tokens": 3000`, 0},
		{`"cache_creation_input_tokens": 100, "cache_creation": {"ephemeral_1h_input_tokens": 500}`, 100},
		{`"cache_creation_input_tokens": 100, "cache_creation": {"ephemeral_1h_input_tokens": -5}`, 0},
	} {
		body := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-4-7","content":[{"type":"text","text":"Hi"}],` +
			`"stop_reason":"end_turn","usage":{"input_tokens": 12, "cache_read_input_tokens": 0, "output_tokens": 6, ` + tc.usage + `}}`
		p, _ := serve(t, providertest.Fixed(http.StatusOK, body))
		resp := providertest.Complete(t, p, providertest.UserCall("claude-opus-4-7", llmclient.UserMessage("Hello")))
		if resp.Usage.CacheWrite1hTokens != tc.want1h {
			t.Errorf("%s: one-hour writes %d, want %d (usage %+v)", tc.usage, resp.Usage.CacheWrite1hTokens, tc.want1h, resp.Usage)
		}
	}

	body := strings.Replace(streamText, `"cache_creation_input_tokens": 0`,
		`"cache_creation_input_tokens": 2048, "cache_creation": {"ephemeral_5m_input_tokens": 48, "ephemeral_1h_input_tokens": 2000}`, 1)
	st := openStream(t, providertest.SSE(body))
	var last llmclient.Chunk
	for {
		c, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if c.Usage != nil {
			last = c
		}
	}
	if last.Usage == nil || last.Usage.CacheWriteTokens != 2048 || last.Usage.CacheWrite1hTokens != 2000 {
		t.Errorf("stream usage %+v, want 2,048 cache writes of which 2,000 one-hour", last.Usage)
	}
}
