package llmclient

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
// (a real call always has prompt tokens, so an all-zero usage means none was reported).
func (c *Client) fillEstimate(r *run, resp *Response) {
	if u := &resp.Usage; u.InputTokens != 0 || u.OutputTokens != 0 || u.TotalTokens != 0 {
		return
	}
	n := len(resp.Text) + len(resp.Reasoning) + len(resp.Refusal)
	for i := range resp.ToolCalls {
		n += len(resp.ToolCalls[i].Name) + len(resp.ToolCalls[i].Arguments)
	}
	resp.Usage = c.estimatedUsage(r, n)
}
