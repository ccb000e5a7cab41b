package llmclient

import (
	"strings"
	"testing"
)

// BenchmarkAffinityHash is the affinity hash of a request with a 6 KiB system prompt, over
// a 4 KiB prefix; and for comparison the estimate of the same prompt the limiter makes per
// call (with its family and script calibration) and the heuristic's count alone.
func BenchmarkAffinityHash(b *testing.B) {
	req := &Request{Model: "m", Messages: []Message{
		SystemMessage(strings.Repeat("You answer questions about the attached contract. ", 120)),
		UserMessage("Say hello.")}}
	b.Run("prefix-4KiB", func(b *testing.B) {
		b.SetBytes(4096)
		b.ReportAllocs()
		for b.Loop() {
			if affinityOf(req, 4096) == 0 {
				b.Fatal("no affinity")
			}
		}
	})
	b.Run("estimate-6KiB", func(b *testing.B) {
		lc := defaultLimiterConfig()
		lc.ratioMemo, lc.familySet = new(ratioCache), new(familySet)
		b.SetBytes(int64(len(req.Messages[0].Content[0].Text)))
		b.ReportAllocs()
		for b.Loop() {
			if p, _ := lc.promptEstimate(req); p == 0 {
				b.Fatal("no estimate")
			}
		}
	})
	b.Run("heuristic-6KiB", func(b *testing.B) {
		b.SetBytes(int64(len(req.Messages[0].Content[0].Text)))
		b.ReportAllocs()
		for b.Loop() {
			if EstimatePromptTokens(nil, req) == 0 {
				b.Fatal("no estimate")
			}
		}
	})
}
