package anthropic_test

import (
	"math"
	"net/http"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/anthropic"
)

// Anthropic's input is input_tokens plus the cache reads and writes: counts that add past
// the largest int saturate instead of wrapping to a negative prompt (a call priced at $0).
func TestUsageInputSaturates(t *testing.T) {
	const body = `{"id":"m1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hi"}],
	  "stop_reason":"end_turn","usage":{"input_tokens":9223372036854775807,"cache_read_input_tokens":2000,"cache_creation_input_tokens":7,"output_tokens":6}}`
	p, _ := serve(t, providertest.Fixed(http.StatusOK, body))
	resp := providertest.Complete(t, p, providertest.UserCall("claude-sonnet-4-5", llmclient.UserMessage("Hello")))
	if resp.Usage.InputTokens != math.MaxInt || resp.Usage.TotalTokens != math.MaxInt || resp.Usage.OutputTokens != 6 {
		t.Errorf("usage = %+v", resp.Usage)
	}
}

// A usage count that is not an integer never fails an otherwise valid answer, and the
// typed answer and the transport's usage reader read the same usage from it: a fraction
// is truncated, and a count that cannot be one (negative, not a number, beyond int64)
// makes the input it is part of -1, which the Client takes as no report.
func TestUsageHostileCounts(t *testing.T) {
	for _, tc := range []struct {
		usage   string
		in, out int
	}{
		{`{"input_tokens":5.7,"output_tokens":3}`, 5, 3},
		{`{"input_tokens":1e3,"cache_read_input_tokens":2.5,"output_tokens":3.9}`, 1002, 3},
		{`{"input_tokens":-5,"output_tokens":3}`, -1, 3},
		{`{"input_tokens":5,"cache_creation_input_tokens":-1e18,"output_tokens":3}`, -1, 3},
		{`{"input_tokens":"5","output_tokens":3}`, -1, 3},
		{`{"input_tokens":92233720368547758070,"output_tokens":3}`, -1, 3},
		{`{"input_tokens":5,"output_tokens":-1000000}`, 5, -1000000},
	} {
		body := `{"id":"m1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":` + tc.usage + `}`
		p, srv := serve(t, providertest.Fixed(http.StatusOK, body))
		resp := providertest.Complete(t, p, providertest.UserCall("m", llmclient.UserMessage("Hello")))
		if resp.Usage.InputTokens != tc.in || resp.Usage.OutputTokens != tc.out || srv.Len() != 1 {
			t.Errorf("%s: usage %+v after %d calls, want in %d, out %d", tc.usage, resp.Usage, srv.Len(), tc.in, tc.out)
		}
		if u, _, ok := p.ReadUsage(anthropic.ShapeMessages, []byte(body)); !ok || u != resp.Usage {
			t.Errorf("%s: the transport reads %+v (%v), the typed answer %+v", tc.usage, u, ok, resp.Usage)
		}
	}
}
