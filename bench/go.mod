module github.com/llmclient/llmclient/bench

go 1.25.0

replace github.com/llmclient/llmclient => ../

require (
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/llmclient/llmclient v0.0.0-00010101000000-000000000000
	github.com/openai/openai-go/v3 v3.74.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/coder/websocket v1.8.15 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
	github.com/tidwall/gjson v1.19.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	golang.org/x/time v0.15.0 // indirect
)
