package llmclient

// maxUsageTokens is the largest count a usage report may state and still be taken as the
// upstream's word: 2^30 (about 1.07 billion) tokens, a hundred times the largest context
// window any vendor offers. A count above it can only be a lie or a corruption; billing it
// would let one answer spend a budget's whole cap (2^40 tokens of gpt-4o output is more
// than pricing.MaxMoney).
const maxUsageTokens = 1 << 30

// usageReported is the one rule that decides whether an upstream's usage report is what
// its call used, for the response, the trace and events, the price, the budgets and the
// limiter's reconciliation alike (Complete and Embed in fillEstimate, and a hedged call's
// loser that answered through it in run.lost; a stream's or a transport stream's usage in
// committed.note, a transport body's in txCall.readUsage, a failed answer's in
// attemptBill.noteError). A count that cannot be one is not reported:
//
//   - a total (input, output, total) that is negative (the adapters read a stated count
//     that is not a number, or is out of range, as -1) or above maxUsageTokens leaves the
//     report untaken, and so does a report of nothing (every total 0: a real call always
//     has prompt tokens). The Client's estimate then stands for it, marked Estimated, as
//     for a call whose upstream reported no usage;
//   - a negative part (cache reads or writes, reasoning) is a part not reported: it is
//     set to 0 in u, which is taken. A part larger than its total is taken too: pricing
//     cuts it to the total (clampTokens).
func usageReported(u *Usage) bool {
	if u.InputTokens == 0 && u.OutputTokens == 0 && u.TotalTokens == 0 {
		return false
	}
	// A negative count is a huge unsigned one: one comparison a total.
	if uint(u.InputTokens) > maxUsageTokens || uint(u.OutputTokens) > maxUsageTokens || uint(u.TotalTokens) > maxUsageTokens {
		return false
	}
	if u.CachedInputTokens|u.CacheWriteTokens|u.CacheWrite1hTokens|u.ReasoningTokens < 0 {
		u.CachedInputTokens, u.CacheWriteTokens = max(u.CachedInputTokens, 0), max(u.CacheWriteTokens, 0)
		u.CacheWrite1hTokens, u.ReasoningTokens = max(u.CacheWrite1hTokens, 0), max(u.ReasoningTokens, 0)
	}
	return true
}

// estimatedUsage is the Client's own estimate for an attempt whose upstream reported no
// usage: the prompt's estimate, and the output's at four bytes of text a token (the
// output is not kept for counting; CJK text is undercounted by this rule).
func (c *Client) estimatedUsage(r *run, outBytes int) Usage {
	if r.prompt == 0 { // not computed yet (the limiter needs no cost)
		r.prompt, r.cal = c.cfg.limiter.promptEstimate(r.req)
		r.prompt++
	}
	in := r.prompt - 1
	out := (max(outBytes, 0) + 3) / 4
	return Usage{InputTokens: in, OutputTokens: out, TotalTokens: satAdd(in, out), Estimated: true}
}

// fillEstimate sets resp's usage to the Client's estimate when the upstream reported none
// it can take (usageReported).
func (c *Client) fillEstimate(r *run, resp *Response) {
	if usageReported(&resp.Usage) {
		return
	}
	n := len(resp.Text) + len(resp.Reasoning) + len(resp.Refusal)
	for i := range resp.ToolCalls {
		n += len(resp.ToolCalls[i].Name) + len(resp.ToolCalls[i].Arguments)
	}
	resp.Usage = c.estimatedUsage(r, n)
}
