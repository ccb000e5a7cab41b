// Package bench holds comparison benchmarks that need third-party modules (failsafe-go,
// openai-go). It is a nested module so the core llmclient module never depends on them.
// Run: cd bench && go test -run '^$' -bench . -benchmem
package bench
