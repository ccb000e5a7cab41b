package llmclient_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A continued OpenAI stream's usage chunk, which the Transport writes for the caller,
// carries the prompt cache's reads and writes the fallback reported.
func TestTransportContinuationUsageCarriesCacheWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cut := oaiStream("s1", 100, 7, 99, "Hel", "lo")[:3]
		b := oaiStream("s2", 200, 7, 3, "Hel", "lo", " world")
		usage := &b[len(b)-2]
		usage.data = strings.Replace(usage.data, `"total_tokens":10}`,
			`"total_tokens":10,"prompt_tokens_details":{"cached_tokens":2,"cache_write_tokens":4}}`, 1)
		require.Contains(t, usage.data, "cache_write_tokens")
		_, rt := contPair(t, newScript(sseStep(cut...)), newScript(sseStep(b...)))
		resp, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions",
			`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
		require.NoError(t, err)
		body, err := readBody(t, resp)
		require.NoError(t, err)
		assert.Contains(t, body, `"prompt_tokens_details":{"cached_tokens":2,"cache_write_tokens":4}`)
	})
}
