module github.com/llmclient/llmclient/provider/conformance/specs

go 1.25.0

replace github.com/llmclient/llmclient => ../../..

require (
	github.com/llmclient/llmclient v0.0.0
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	go.uber.org/goleak v1.3.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	golang.org/x/text v0.14.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)
