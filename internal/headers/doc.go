// Package headers parses the wait and quota information LLM vendors send in HTTP headers and
// error messages: Retry-After in its several spellings, x-should-retry, Go-style reset
// durations, RFC 3339 reset timestamps and "try again in 634ms" hints.
//
// Every function is pure (time is passed in), allocation-light, safe for concurrent use and
// never panics on hostile input. Results are never negative. Durations that would overflow
// saturate at the largest time.Duration; callers apply their own caps.
//
// The package must not import the root llmclient package: the root's adapters import it.
package headers
