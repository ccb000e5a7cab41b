package anthropic_test

import (
	"math"
	"net/http"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/providertest"
)

// Anthropic's input is input_tokens plus the cache reads and writes: counts that add past
// the largest int saturate instead of wrapping to a negative prompt (a call priced at $0).
func TestUsageInputSaturates(t *testing.T) {
	const body = `{"id":"m1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hi"}],
	  "stop_reason":"end_turn","usage":{"input_tokens":9223372036854775807,"cache_read_input_tokens":2000,"cache_creation_input_tokens":-7,"output_tokens":6}}`
	p, _ := serve(t, providertest.Fixed(http.StatusOK, body))
	resp := providertest.Complete(t, p, providertest.UserCall("claude-sonnet-4-5", llmclient.UserMessage("Hello")))
	if resp.Usage.InputTokens != math.MaxInt || resp.Usage.TotalTokens != math.MaxInt || resp.Usage.OutputTokens != 6 {
		t.Errorf("usage = %+v", resp.Usage)
	}
}
