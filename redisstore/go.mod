module github.com/llmclient/llmclient/redisstore

go 1.25.0

replace github.com/llmclient/llmclient => ../

require (
	github.com/llmclient/llmclient v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.22.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.30.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)
