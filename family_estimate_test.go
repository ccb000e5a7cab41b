package llmclient_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
)

// tokenizerUpstream answers every call with the prompt tokens a vendor's tokenizer would
// count: the o200k estimate of the request times the model's factor for the request's
// script (factors[model][cjk]).
type tokenizerUpstream struct {
	factors map[string][2]float64
}

func (p tokenizerUpstream) Complete(_ context.Context, call *llmclient.Call) (*llmclient.Response, error) {
	cjk := 0
	if strings.ContainsRune(call.Request.Messages[0].Content[0].Text, '漢') {
		cjk = 1
	}
	in := int(math.Round(float64(llmclient.EstimatePromptTokens(nil, call.Request)) * p.factors[call.Model][cjk]))
	return &llmclient.Response{Text: "ok", Usage: llmclient.Usage{InputTokens: in, OutputTokens: 2, TotalTokens: in + 2}}, nil
}

func (tokenizerUpstream) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, llmclient.ErrUnsupported
}

func familyReq(model, text string) *llmclient.Request {
	return &llmclient.Request{Model: model, MaxTokens: 100,
		Messages: []llmclient.Message{llmclient.UserMessage(strings.Repeat(text, 40))}}
}

// promptCharged returns the prompt part of what the key's limiter charged for req (the
// Client's estimate, times what the key learned), checking that the Client's estimate is
// the same (the upstream sends no rate-limit headers to calibrate the charge).
func promptCharged(t *testing.T, c *llmclient.Client, req *llmclient.Request) int {
	t.Helper()
	resp, err := c.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	a := resp.Attempts[0]
	if a.ChargedTokens != a.EstimatedTokens {
		t.Errorf("%s: charged %d, estimated %d: the key scaled the estimate", req.Model, a.ChargedTokens, a.EstimatedTokens)
	}
	return a.ChargedTokens - req.MaxTokens
}

// TestEstimateCalibratedPerModelFamily: one key serves Claude Opus 4.7, whose tokenizer
// counts about 1.45× the earlier Claude models' tokens on English and about the same on
// CJK, and Claude Sonnet 4.5. What the Client learns from Opus 4.7's usage on English moves
// Opus 4.7's English estimate to the upstream's count, and neither Sonnet 4.5's estimate
// (another family) nor Opus 4.7's CJK estimate (another script).
func TestEstimateCalibratedPerModelFamily(t *testing.T) {
	const old = 1.25 // the earlier Claude tokenizer against o200k
	up := tokenizerUpstream{factors: map[string][2]float64{
		"claude-opus-4-7":   {old * 1.45, old * 1.0},
		"claude-sonnet-4-5": {old, old},
	}}
	c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "anthropic", Provider: up,
		Limits: llmclient.Limits{TPM: 100_000_000}}))
	english, cjk := "The quick brown fox jumps over the lazy dog. ", "漢字の文章を数える。"
	sonnet0 := promptCharged(t, c, familyReq("claude-sonnet-4-5", english))
	opusCJK0 := promptCharged(t, c, familyReq("claude-opus-4-7", cjk))
	for range 30 {
		promptCharged(t, c, familyReq("claude-opus-4-7", english))
	}
	req := familyReq("claude-opus-4-7", english)
	want := float64(llmclient.EstimatePromptTokens(nil, req)) * old * 1.45
	if got := promptCharged(t, c, req); math.Abs(float64(got)-want) > 0.03*want {
		t.Errorf("Opus 4.7 English estimate %d after calibration, want the upstream's %.0f ±3%%", got, want)
	}
	if got := promptCharged(t, c, familyReq("claude-sonnet-4-5", english)); got != sonnet0 {
		t.Errorf("Sonnet 4.5 estimate moved from %d to %d by what Opus 4.7 taught", sonnet0, got)
	}
	if got := promptCharged(t, c, familyReq("claude-opus-4-7", cjk)); got != opusCJK0 {
		t.Errorf("Opus 4.7 CJK estimate moved from %d to %d by what English taught", opusCJK0, got)
	}
}

// TestModelFamilyOption: WithModelFamily puts a model into a family (its ratio and its
// calibration), and New refuses empty names and ratios outside [0.1, 10].
func TestModelFamilyOption(t *testing.T) {
	up := tokenizerUpstream{factors: map[string][2]float64{"claude-opus-4-8": {2, 2}, "claude-opus-4-7": {2, 2}}}
	c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: up, Limits: llmclient.Limits{TPM: 1e8}}),
		llmclient.WithModelFamily("claude-opus-4-8", "claude-4.7", 0))
	text := "Count these words, please. "
	if a, b := promptCharged(t, c, familyReq("claude-opus-4-8", text)), promptCharged(t, c, familyReq("claude-opus-4-7", text)); a != b {
		t.Errorf("claude-opus-4-8 in family claude-4.7 estimated %d, claude-opus-4-7 %d: want the family's ratio", a, b)
	}
	for range 10 { // teach the family: 2× the estimate
		promptCharged(t, c, familyReq("claude-opus-4-7", text))
	}
	if a, b := promptCharged(t, c, familyReq("claude-opus-4-8", text)), promptCharged(t, c, familyReq("claude-opus-4-7", text)); a != b {
		t.Errorf("after calibration claude-opus-4-8 estimated %d, claude-opus-4-7 %d: want one calibration for the family", a, b)
	}
	for _, tc := range []struct {
		match, family string
		ratio         float64
	}{{"", "f", 1}, {"m", "", 1}, {"m", "f", -1}, {"m", "f", 0.05}, {"m", "f", 11}, {"m", "f", math.NaN()}, {"m", "f", math.Inf(1)}} {
		_, err := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: up}),
			llmclient.WithModelFamily(tc.match, tc.family, tc.ratio))
		if err == nil {
			t.Errorf("WithModelFamily(%q, %q, %v) accepted", tc.match, tc.family, tc.ratio)
		}
	}
}
