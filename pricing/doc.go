// Package pricing prices LLM calls: per-model rates in exact integer money, the tiers,
// start dates and time-of-day windows of the @pydantic/genai-prices database, a snapshot of
// that database embedded in the package, and a planner for the daily and monthly cost of a
// workload.
//
//	m, ok := pricing.Default().Lookup("anthropic", resp.Model) // cached: tens of ns, no allocation
//	if !ok {
//		// no price: the cost is unknown, never $0
//	}
//	cost, err := m.Cost(pricing.Tokens{Input: 12_000, CacheRead: 8000, Output: 700}, start)
//
// # Money
//
// Money counts picodollars (1e-12 USD) in an int64: exact sums over any number of calls, a
// maximum of about $9.22 million (MaxMoney), saturating arithmetic. A rate is held in whole
// picodollars per token, which is exact for every rate with at most six decimals of dollars
// per million tokens. The loader rounds finer rates to the nearest picodollar per token; in
// the shipped snapshot that touches six OpenRouter cache-write rates written as
// 0.08333333333333334 (1/12 in float64), held as $0.083333/MTok, an error below $0.0000004
// per million tokens.
//
// # The rules of the data
//
// Matching, tiers and conditional prices follow the database's own engine (the npm package
// @pydantic/genai-prices 0.1.8), checked against its results for every model of the snapshot
// (testdata/reference.csv):
//
//   - Names are trimmed and lower-cased; string clauses ignore case; regular expressions run
//     on the lower-cased name. Go's RE2 has no lookaround, so a leading negative lookahead
//     ^(?!A)B, which the data uses to exclude "-tts" variants and prefixed names, is
//     evaluated as "^(?:A) does not match and ^B does"; other lookaround fails to load.
//   - Tiers are cliffs selected by the whole prompt (Tokens.Input, cached tokens included):
//     above a tier's threshold its rate applies to every token of the kind, output included.
//   - A model's conditional prices are tried last to first and the first active one applies,
//     else the first in the list. A start_date price is active from midnight UTC of its date;
//     a time_of_date price daily within [start, end), times given with Z or an offset and
//     compared in UTC (DeepSeek's standard rate from 00:30 to 16:30 UTC; its default price is
//     the off-peak discount).
//   - Cached reads and writes and reasoning tokens are parts of Tokens.Input and
//     Tokens.Output, and Anthropic's one-hour cache writes part of Tokens.CacheWrite
//     (cache_write_1h_mtok); without their own rate they bill at the rate of their total.
//
// Not priced: audio, image and video tokens (billed as text), web searches and other tool
// fees, and the storage of Gemini's explicit context caches (per token-hour, not per
// call). A model the data prices only in such units (whisper-1, OCR pages) reports
// ErrNotPerToken.
//
// # Tables
//
// Default is the embedded snapshot (SnapshotSource), parsed once on first use. Load and
// LoadFile read a newer file of the same shape; NewModel and Model.WithPrice build a price
// by hand for a negotiated rate or a self-hosted model at zero. Tables and Models are
// immutable and safe for concurrent use.
//
// The snapshot is derived from genai-prices, Copyright (c) Pydantic Services Inc., MIT
// licence (data/LICENSE).
package pricing
