package anthropic_test

import (
	"github.com/llmclient/llmclient/estimate"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/anthropic"
)

// TestEstimateBodyTokensSeesEverything checks that the estimate reads every part of a
// Messages body that costs prompt tokens.
func TestEstimateBodyTokensSeesEverything(t *testing.T) {
	providertest.CheckCounted(t, anthropic.EstimateBodyTokens, "tool_round_trip.json", []string{
		"Use tools.", "Be brief.", "Weather in Paris and Rome?", "Checking both.",
		"get_weather", `{"city":"Paris"}`, "toolu_01", "18C, cloudy", "25C, sunny", "Which is warmer?",
		"Current weather for a city.", "now",
	}, []string{`"required"`}) // the tool schema
}

// TestEstimateBodyTokensMatchesRequest compares the body estimate with the estimate of the
// request it was built from, times the Claude ratio.
func TestEstimateBodyTokensMatchesRequest(t *testing.T) {
	req := &llmclient.Request{
		Model: "claude-sonnet-4-5",
		Messages: []llmclient.Message{
			llmclient.SystemMessage("You are a careful assistant who answers questions about geography."),
			llmclient.UserMessage(strings.Repeat("Tell me about the rivers of Europe and their history. ", 40)),
			llmclient.AssistantMessage(strings.Repeat("The Danube flows through ten countries. ", 30)),
			llmclient.UserMessage("And the Rhine?"),
		},
	}
	body, err := os.ReadFile(filepath.Join("testdata", "simple.json"))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := anthropic.EstimateBodyTokens(body, nil); err != nil || n <= 0 {
		t.Fatalf("simple body: %d, %v", n, err)
	}
	p, rec := serve(t, providertest.Fixed(200, okBody))
	providertest.Complete(t, p, &llmclient.Call{Model: req.Model, Request: req})
	got, err := anthropic.EstimateBodyTokens(rec.Last(t).Body, estimate.Heuristic{})
	if err != nil {
		t.Fatal(err)
	}
	want := int(math.Ceil(float64(llmclient.EstimatePromptTokens(estimate.Heuristic{}, req)) * anthropic.TokenRatio))
	if got != want {
		t.Errorf("body estimate %d, request estimate × ratio %d", got, want)
	}
}

func TestEstimateBodyTokensInvalid(t *testing.T) {
	for _, body := range []string{"", "[]", "{", `{"messages":"x"}`} {
		if _, err := anthropic.EstimateBodyTokens([]byte(body), nil); err == nil || !strings.HasPrefix(err.Error(), "anthropic: ") {
			t.Errorf("%q: err = %v, want an anthropic: error", body, err)
		}
	}
	// Odd but valid JSON estimates what it can.
	n, err := anthropic.EstimateBodyTokens([]byte(`{"messages":[{"role":"user","content":[{"type":"image","source":{}},{"type":"tool_result","tool_use_id":"t"}]},{"role":"user","content":7}]}`), nil)
	if err != nil || n <= 0 {
		t.Errorf("lenient body: %d, %v", n, err)
	}
}
