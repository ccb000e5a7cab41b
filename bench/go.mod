module github.com/llmclient/llmclient/bench

go 1.25.0

replace github.com/llmclient/llmclient => ../

require (
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/llmclient/llmclient v0.0.0-00010101000000-000000000000
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
)
