package gemini_test

import (
	"math"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/gemini"
)

// TestEstimateBodyTokensSeesEverything checks that the estimate reads every part of a
// GenerateContentRequest that costs prompt tokens.
func TestEstimateBodyTokensSeesEverything(t *testing.T) {
	providertest.CheckCounted(t, gemini.EstimateBodyTokens, "tool_round_trip.json", []string{
		"Use tools.", "Be brief.", "Weather in Paris and Rome?", "Checking both.",
		"get_weather", `{"city":"Paris"}`, `{"output":"25C, sunny"}`, "Which is warmer?",
		"Current weather for a city.", "now",
	}, []string{`"temp_c":18`, `"additionalProperties":false`})
}

// TestEstimateBodyTokensMatchesRequest compares the body estimate with the estimate of the
// request it was built from, times the Gemini ratio.
func TestEstimateBodyTokensMatchesRequest(t *testing.T) {
	req := &llmclient.Request{
		Messages: []llmclient.Message{
			llmclient.SystemMessage("You are a careful assistant who answers questions about geography."),
			llmclient.UserMessage(strings.Repeat("Tell me about the rivers of Europe and their history. ", 40)),
			llmclient.AssistantMessage(strings.Repeat("The Danube flows through ten countries. ", 30)),
			llmclient.UserMessage("And the Rhine?"),
		},
	}
	p, rec := serve(t, providertest.Fixed(200, okBody))
	providertest.Complete(t, p, &llmclient.Call{Model: "gemini-2.5-flash", Request: req})
	got, err := gemini.EstimateBodyTokens(rec.Last(t).Body, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := int(math.Ceil(float64(llmclient.EstimatePromptTokens(nil, req)) * gemini.TokenRatio))
	if got != want {
		t.Errorf("body estimate %d, request estimate × ratio %d", got, want)
	}
}

func TestEstimateBodyTokensInvalid(t *testing.T) {
	for _, body := range []string{"", "[]", "{", `{"contents":{}}`} {
		if _, err := gemini.EstimateBodyTokens([]byte(body), nil); err == nil || !strings.HasPrefix(err.Error(), "gemini: ") {
			t.Errorf("%q: err = %v, want a gemini: error", body, err)
		}
	}
	n, err := gemini.EstimateBodyTokens([]byte(`{"contents":[{"parts":[{"inlineData":{"mimeType":"image/png","data":"AAAA"}},{"fileData":{}}]}],"generationConfig":{"responseSchema":{"type":"STRING"}}}`), nil)
	if err != nil || n <= 0 {
		t.Errorf("lenient body: %d, %v", n, err)
	}
}
