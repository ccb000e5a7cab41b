package gemini_test

import (
	"math"
	"net/http"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/providertest"
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
