// Package httpx holds the HTTP plumbing shared by the provider adapters and the root
// package: the default client, bounded body reads, URL joining, base URL and header checks,
// and building an adapter's JSON POST. It does not import llmclient (the root package
// imports it); the llmclient-aware part is internal/adapter. Errors meant for a user carry
// no package prefix: the adapter adds its own. Everything here is safe for concurrent use.
package httpx

import (
	"net"
	"net/http"
	"time"
)

// DefaultClient returns a new *http.Client for LLM APIs. Each call returns a fresh client
// with its own connection pool; nothing is shared or global.
//
// Its transport dials in at most 30s, finishes TLS in 10s and waits up to 10 minutes for
// response headers (a queued or slow non-streaming completion can take minutes before its
// first byte). It keeps connections alive with a pool of 100 idle connections, 32 per host,
// dropped after 90s idle, honours HTTP(S)_PROXY and negotiates HTTP/2.
//
// The client has no overall Timeout on purpose: http.Client.Timeout bounds the whole
// exchange including reading the body, so it would cut off long streams that are healthy.
// Bound each call with its context instead (the Client's per-attempt and stream timeouts do).
func DefaultClient() *http.Client {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
		ResponseHeaderTimeout: 10 * time.Minute,
	}
	return &http.Client{Transport: t}
}
