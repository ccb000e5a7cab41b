package llmclient

// BudgetQuickPath reports whether c takes the quick path of its one client-wide budget
// (costState.solo), and with off set turns it off for c: the loop over every budget then
// does the work, as for a Client of several budgets.
func BudgetQuickPath(c *Client, off bool) bool {
	if c.cost == nil {
		return false
	}
	on := c.cost.solo != nil
	if off {
		c.cost.solo = nil
	}
	return on
}
