package llmclient

// Test-only views of what a Client holds, for the black-box invariant checker.

// LeasesHeld reports what c holds across every upstream: key slots (picked keys not yet
// settled), limiter admissions not yet released, and caller-partition admissions.
func LeasesHeld(c *Client) (keys, limiters, partitions int) {
	for _, up := range c.upstreams {
		for _, k := range up.pool().keys {
			keys += int(k.inFlight.Load())
			limiters += k.limiter().InFlight()
		}
	}
	if c.partitions != nil {
		c.partitions.parts.Range(func(_, v any) bool {
			partitions += v.(*partition).lim.InFlight()
			return true
		})
	}
	return keys, limiters, partitions
}
