package otel

import "testing"

// SetMaxCountedSets lowers the bound of llmclient.client.attempts' counted sets for t.
func SetMaxCountedSets(t *testing.T, n int) {
	old := maxCountedSets
	maxCountedSets = n
	t.Cleanup(func() { maxCountedSets = old })
}
