package llmclient

import (
	"strings"

	"github.com/llmclient/llmclient/estimate"
)

// The request-level formula. Chat models read a conversation as text with a few tokens of
// framing per message; these are the counts of OpenAI's cookbook ("How to count tokens with
// tiktoken", num_tokens_from_messages, for gpt-4o and gpt-4) and are used for every vendor.
const (
	tokensPerMessage = 3 // framing of every message
	tokensPerRole    = 1 // "system", "user", "assistant" and "tool" are one token each
	tokensPerName    = 1 // a message's Name field
	tokensPriming    = 3 // every reply is primed with <|start|>assistant<|message|>
	tokensPerCall    = 3 // framing of one tool call in an assistant message
	// Tool definitions: the cookbook's function-calling estimate charges about 7 tokens
	// per function and 12 to close the list; the definition's name, description and
	// JSON Schema are counted as text, which overcounts slightly against the compact
	// form the vendors render.
	tokensPerTool = 7
	tokensTools   = 12
	// Images cost a fixed amount, since their size is unknown before decoding: OpenAI's
	// 85 tokens at low detail, and at high or automatic detail 765, the cost of a
	// 1024×1024 image (85 + 4 tiles × 170). Anthropic charges about width×height/750
	// (≈1,400 for 1024×1024) and Gemini 258 per image; a different vendor's real cost is
	// reconciled after the response.
	tokensImageLow  = 85
	tokensImageHigh = 765
)

// EstimatePromptTokens returns e's estimate of the prompt tokens of req: every message's
// text parts, names, tool calls and tool-call ids with the per-message framing, fixed costs
// for images, the tool definitions and the response format's schema. A nil e means
// estimate.Heuristic. No vendor correction ratio is applied.
func EstimatePromptTokens(e estimate.Estimator, req *Request) int {
	if e == nil {
		e = estimate.Heuristic{}
	}
	model := req.Model
	n := tokensPriming
	for i := range req.Messages {
		m := &req.Messages[i]
		n += tokensPerMessage + tokensPerRole
		for j := range m.Content {
			p := &m.Content[j]
			switch p.Type {
			case PartImage:
				if p.Detail == "low" {
					n += tokensImageLow
				} else {
					n += tokensImageHigh
				}
			default:
				n += e.CountTokens(model, p.Text)
			}
		}
		if m.Name != "" {
			n += tokensPerName + e.CountTokens(model, m.Name)
		}
		if m.ToolCallID != "" {
			n += e.CountTokens(model, m.ToolCallID)
		}
		for k := range m.ToolCalls {
			tc := &m.ToolCalls[k]
			n += tokensPerCall + e.CountTokens(model, tc.Name) + e.CountTokens(model, tc.Arguments)
		}
	}
	if len(req.Tools) > 0 {
		n += tokensTools
		for i := range req.Tools {
			t := &req.Tools[i]
			n += tokensPerTool + e.CountTokens(model, t.Name) + e.CountTokens(model, t.Description)
			if len(t.Parameters) > 0 {
				n += e.CountTokens(model, string(t.Parameters))
			}
		}
	}
	if rf := req.ResponseFormat; rf != nil && len(rf.Schema) > 0 {
		n += e.CountTokens(model, rf.Name) + e.CountTokens(model, string(rf.Schema))
	}
	return n
}

// tokenRatio corrects the estimate for models whose name contains match: their tokenizers
// count ratio times the tokens of o200k_base for the same text (WithTokenRatio).
type tokenRatio struct {
	match string
	ratio float64
}

// ratioFor returns the correction for model (see info).
func (c *limiterConfig) ratioFor(model string) float64 {
	return c.info(model).ratio
}

// info returns what the limiter needs of model: its family (see defaultFamilies) and its
// correction, the longest matching WithTokenRatio (the later one on a tie), else its
// family's ratio; remembered per model name (ratioCache).
func (c *limiterConfig) info(model string) *modelInfo {
	if m := c.ratioMemo.get(model); m != nil {
		return m
	}
	m := c.matchInfo(model)
	c.ratioMemo.put(m)
	return m
}

// matchInfo is info without the cache.
func (c *limiterConfig) matchInfo(model string) *modelInfo {
	m := &modelInfo{model: model}
	m.family, m.ratio = c.matchFamily(model)
	if c.familySet != nil {
		m.fam = c.familySet.get(m.family)
	}
	best := -1
	for i := range c.ratios {
		r := &c.ratios[i]
		if len(r.match) >= best && len(r.match) <= len(model) && strings.Contains(model, r.match) {
			best, m.ratio = len(r.match), r.ratio
		}
	}
	return m
}

// matchRatio is ratioFor without the cache.
func (c *limiterConfig) matchRatio(model string) float64 {
	return c.matchInfo(model).ratio
}

// cost returns what a request is charged against a tokens-per-minute bucket: its prompt
// estimate, corrected for the model's vendor, plus the output it may produce (MaxTokens,
// else the reserved output default). The engine calls it once per call.
//
// It saturates at maxCost (2^40 tokens), far beyond any quota, so that adding to it
// never overflows.
func (c *limiterConfig) cost(req *Request) int {
	return c.costWith(req, c.promptTokens(req))
}

// costWith is cost for a request whose prompt estimate is known.
func (c *limiterConfig) costWith(req *Request, prompt int) int {
	return min(satAdd(prompt, c.output(req)), maxCost)
}

// output is the output a request is charged for before its response: its MaxTokens,
// else the reserved output default.
func (c *limiterConfig) output(req *Request) int {
	if req.MaxTokens > 0 {
		return req.MaxTokens
	}
	return c.reservedOutput
}

// maxCost is the largest charge of one request, in tokens.
const maxCost = 1 << 40

// promptTokens is the estimate of req's prompt, corrected for the model's family and
// calibrated by what its upstreams reported of the family's prompts in req's script.
func (c *limiterConfig) promptTokens(req *Request) int {
	prompt, _ := c.promptEstimate(req)
	return prompt
}

// promptEstimate is promptTokens, with the calibration the request's usage teaches.
func (c *limiterConfig) promptEstimate(req *Request) (int, calibration) {
	prompt := EstimatePromptTokens(c.estimator, req)
	m := c.info(req.Model)
	prompt = correct(prompt, m.ratio)
	if m.fam == nil {
		return prompt, calibration{}
	}
	cell := &m.fam.cells[scriptOf(req)]
	return correct(prompt, cell.get()), calibration{cell: cell, raw: prompt}
}

// defaultReservedOutput is the output a request without MaxTokens is charged for before
// its response arrives. Most chat replies are a few hundred tokens; 1024 covers the
// common long ones without holding a large share of a small bucket, and the difference
// is settled when the response reports its usage.
const defaultReservedOutput = 1024

// WithEstimator sets the token estimator the limiter charges prompts with. Default
// estimate.Heuristic{}; tokenizer/tiktoken.Estimator{} counts OpenAI encodings exactly at a
// much higher CPU cost. A nil e restores the default.
func WithEstimator(e estimate.Estimator) Option {
	return optionFunc(func(c *config) { c.limiter.estimator = e })
}

// WithReservedOutput sets the output tokens charged for a request whose MaxTokens is 0.
// It must be positive; values beyond what any bucket holds are charged as a debt (see
// Limits.TokenBurst). Default 1024.
func WithReservedOutput(n int) Option {
	return optionFunc(func(c *config) { c.limiter.reservedOutput = n })
}

// WithTokenRatio corrects prompt estimates for models whose name contains match: their
// tokenizer counts ratio times what o200k_base counts for the same text. It overrides the
// ratio of the model's family (claude 1.25, claude-4.7 1.69, gemini 1.15, others 1; see
// WithModelFamily and BENCHMARKS.md) for the models it matches; when several match, the
// longest match wins. The ratio must be between 0.1 and 10.
func WithTokenRatio(match string, ratio float64) Option {
	return optionFunc(func(c *config) {
		c.limiter.ratios = append(c.limiter.ratios, tokenRatio{match: match, ratio: ratio})
	})
}
