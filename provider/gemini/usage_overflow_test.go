package gemini_test

import (
	"math"
	"net/http"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/gemini"
)

// Gemini's output is candidates plus thoughts: counts that add past the largest int
// saturate instead of wrapping to a negative number.
func TestUsageSaturates(t *testing.T) {
	const body = `{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP","index":0}],
	  "usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":9223372036854775807,"thoughtsTokenCount":50},"modelVersion":"gemini-2.5-pro"}`
	p, _ := serve(t, providertest.Fixed(http.StatusOK, body))
	resp := providertest.Complete(t, p, providertest.UserCall("m", llmclient.UserMessage("hi")))
	if resp.Usage.OutputTokens != math.MaxInt || resp.Usage.TotalTokens != math.MaxInt || resp.Usage.InputTokens != 7 {
		t.Errorf("usage = %+v", resp.Usage)
	}
}

// A usage count that is not an integer never fails an otherwise valid answer, and the
// typed answer and the transport's usage reader read the same usage from it: a fraction
// is truncated, and a count that cannot be one (negative, not a number, beyond int64)
// makes the count it is part of -1, which the Client takes as no report.
func TestUsageHostileCounts(t *testing.T) {
	for _, tc := range []struct {
		usage   string
		in, out int
	}{
		{`{"promptTokenCount":5.7,"candidatesTokenCount":3}`, 5, 3},
		{`{"promptTokenCount":1e3,"candidatesTokenCount":3.9,"thoughtsTokenCount":2.5}`, 1000, 5},
		{`{"promptTokenCount":-5,"candidatesTokenCount":3}`, -1, 3},
		{`{"promptTokenCount":5,"candidatesTokenCount":3,"thoughtsTokenCount":-1e18}`, 5, -1},
		{`{"promptTokenCount":"5","candidatesTokenCount":3}`, -1, 3},
		{`{"promptTokenCount":5,"toolUsePromptTokenCount":92233720368547758070,"candidatesTokenCount":3}`, -1, 3},
	} {
		body := `{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP","index":0}],"modelVersion":"m","usageMetadata":` + tc.usage + `}`
		p, srv := serve(t, providertest.Fixed(http.StatusOK, body))
		resp := providertest.Complete(t, p, providertest.UserCall("m", llmclient.UserMessage("hi")))
		if resp.Usage.InputTokens != tc.in || resp.Usage.OutputTokens != tc.out || srv.Len() != 1 {
			t.Errorf("%s: usage %+v after %d calls, want in %d, out %d", tc.usage, resp.Usage, srv.Len(), tc.in, tc.out)
		}
		if u, _, ok := p.ReadUsage(gemini.ShapeGenerateContent, []byte(body)); !ok || u != resp.Usage {
			t.Errorf("%s: the transport reads %+v (%v), the typed answer %+v", tc.usage, u, ok, resp.Usage)
		}
	}
}
