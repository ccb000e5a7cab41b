package pricing

import (
	"errors"
	"fmt"
)

// Tokens counts the tokens of one call for pricing. The parts are included in their totals,
// as in llmclient's Usage (CachedInputTokens is part of InputTokens, ReasoningTokens part of
// OutputTokens) and in the genai-prices usage model:
//
//	Input      = uncached prompt tokens + CacheRead + CacheWrite
//	CacheWrite = five-minute cache writes + CacheWrite1h
//	Output     = visible output tokens + Reasoning
//
// A part is billed at its own rate when the model has one, else at the rate of its total:
// one-hour cache writes at the cache-write rate, cache reads and writes at the input rate,
// reasoning at the output rate. The zero value is an empty call.
type Tokens struct {
	// Input is every prompt token, cached or not.
	Input int
	// CacheRead is the part of Input read from the vendor's prompt cache.
	CacheRead int
	// CacheWrite is the part of Input written to the vendor's prompt cache (Anthropic's
	// cache_creation_input_tokens).
	CacheWrite int
	// CacheWrite1h is the part of CacheWrite written to Anthropic's one-hour cache
	// (usage.cache_creation.ephemeral_1h_input_tokens), billed at twice the input rate
	// where the five-minute writes bill at 1.25 times.
	CacheWrite1h int
	// Output is every generated token, reasoning included.
	Output int
	// Reasoning is the part of Output spent on hidden reasoning.
	Reasoning int
}

// ErrInvalidTokens is wrapped by the error Cost returns for token counts that are negative
// or whose parts exceed their totals. No cost is computed for such counts: it would be a
// guess.
var ErrInvalidTokens = errors.New("pricing: invalid token counts")

// valid reports whether the counts can describe a call: what validate checks, without
// building an error, cheap enough to inline.
func (t Tokens) valid() bool {
	return t.Input|t.CacheRead|t.CacheWrite|t.CacheWrite1h|t.Output|t.Reasoning >= 0 &&
		t.CacheRead <= t.Input && t.CacheWrite <= t.Input-t.CacheRead && t.CacheWrite1h <= t.CacheWrite &&
		t.Reasoning <= t.Output
}

// smallTokens bounds the input and output tokens of a call that Tokens.small accepts:
// 2²¹ (about 2.1 million), far above any context window, low enough that a flat price
// cannot overflow (see maxFlatRate).
const smallTokens = 1 << 21

// small reports whether t is a call without cache or reasoning tokens and with fewer than
// smallTokens input and output tokens, neither negative: valid counts, which a flat price
// prices in two multiplications (price.flatCost).
func (t Tokens) small() bool {
	return t.CacheRead|t.CacheWrite|t.CacheWrite1h|t.Reasoning == 0 && uint64(t.Input)|uint64(t.Output) < smallTokens
}

// validate reports counts that cannot describe a call.
func (t Tokens) validate() error {
	if t.Input < 0 || t.CacheRead < 0 || t.CacheWrite < 0 || t.CacheWrite1h < 0 || t.Output < 0 || t.Reasoning < 0 {
		return fmt.Errorf("%w: negative count in %+v", ErrInvalidTokens, t)
	}
	// Compared without adding, so huge counts cannot overflow.
	if t.CacheRead > t.Input || t.CacheWrite > t.Input-t.CacheRead {
		return fmt.Errorf("%w: cache read %d + cache write %d exceed input %d",
			ErrInvalidTokens, t.CacheRead, t.CacheWrite, t.Input)
	}
	if t.CacheWrite1h > t.CacheWrite {
		return fmt.Errorf("%w: one-hour cache write %d exceeds cache write %d", ErrInvalidTokens, t.CacheWrite1h, t.CacheWrite)
	}
	if t.Reasoning > t.Output {
		return fmt.Errorf("%w: reasoning %d exceeds output %d", ErrInvalidTokens, t.Reasoning, t.Output)
	}
	return nil
}
