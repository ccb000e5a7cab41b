package anthropic_test

import (
	"testing"

	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/provider/anthropic"
)

func TestAcceptsPrefill(t *testing.T) {
	p, err := anthropic.New(anthropic.WithAPIKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	var _ dialect.Prefiller = p
	for model, want := range map[string]bool{
		"claude-3-5-sonnet-20241022": true,
		"claude-3-7-sonnet-latest":   true,
		"claude-opus-4-1":            true,
		"claude-sonnet-4-20250514":   true,
		"claude-sonnet-4-6":          false,
		"claude-opus-4-7":            false,
		"some-future-model":          false,
	} {
		if got := p.AcceptsPrefill(model); got != want {
			t.Errorf("AcceptsPrefill(%q) = %v, want %v", model, got, want)
		}
	}
}
