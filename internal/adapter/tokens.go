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
