package conformance_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/llmclient/llmclient/provider/conformance"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// knownGaps are the cases an adapter is known to fail, excluded until the adapter is
// fixed. Each entry says what is wrong and how to reproduce it; the suite fails once an
// entry's case passes, so the list is kept honest. None are known today.
var knownGaps = map[string][]conformance.KnownGap{}

func targets() []conformance.Target {
	return []conformance.Target{
		{Name: "openai", Wire: openaiWire{}, Embed: openaiWire{}, KnownGaps: knownGaps["openai"]},
		{Name: "openai_responses", Wire: responsesWire{}, KnownGaps: knownGaps["openai_responses"]},
		{Name: "anthropic", Wire: anthropicWire{}, KnownGaps: knownGaps["anthropic"]},
		{Name: "gemini", Wire: geminiWire{}, Embed: geminiWire{}, SignsToolCalls: true, KnownGaps: knownGaps["gemini"]},
		{Name: "fake", Script: fakeScript{}, KnownGaps: knownGaps["fake"]},
	}
}

func TestConformance(t *testing.T) {
	for _, tg := range targets() {
		t.Run(tg.Name, func(t *testing.T) { conformance.Run(t, tg) })
	}
}

// TestEmbed runs the embeddings table for every target whose vendor has embeddings.
func TestEmbed(t *testing.T) {
	for _, tg := range targets() {
		if tg.Embed != nil {
			t.Run(tg.Name, func(t *testing.T) { conformance.RunEmbed(t, tg) })
		}
	}
}

// TestConversation continues a conversation begun on each vendor on each of the others
// and back.
func TestConversation(t *testing.T) {
	conformance.RunConversation(t, targets()...)
}

// fragments splits s into about n pieces, as vendors stream tool-call arguments.
func fragments(s string, n int) []string {
	if n < 1 || len(s) <= n {
		return []string{s}
	}
	size := (len(s) + n - 1) / n
	var out []string
	for len(s) > size {
		out = append(out, s[:size])
		s = s[size:]
	}
	return append(out, s)
}
