package adapter

// AddTokens adds token counts from a vendor's usage report: a negative count counts as 0,
// and the sum saturates at the largest int, so a lying or corrupt report can never wrap
// a total around to a negative number (which would price a call at nothing).
func AddTokens(a, b int) int {
	a, b = max(a, 0), max(b, 0)
	if a > maxInt-b {
		return maxInt
	}
	return a + b
}

const maxInt = int(^uint(0) >> 1)

// SumCounts adds two counts a vendor's usage report states as parts of one count of
// llmclient.Usage (Anthropic's input and cache tokens, Gemini's candidates and thoughts):
// when either is impossible (negative: the report's own, or a value that was no count, see
// jsonx.Count) so is the sum, -1, which the Client takes as no report; else the sum,
// saturating at the largest int.
func SumCounts(a, b int) int {
	if a < 0 || b < 0 {
		return -1
	}
	return AddTokens(a, b)
}
