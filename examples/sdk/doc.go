// Package sdk shows llmclient's transport mode with the official SDKs: openai-go,
// anthropic-sdk-go, google.golang.org/genai and sashabaranov/go-openai keep their own
// calls and types, and gain
// the Client's limiter, classifier, Retry-After-aware retry, circuit breakers, key pools
// and stream guard by sending through Client.Transport.
//
// It is a module of its own, so that the llmclient module itself depends on no SDK. Its
// examples and tests drive the real SDK clients against local httptest servers; run them
// with `go test ./...` in this directory (the repository's `make test` does).
//
// The setup, for any of the SDKs:
//
//	client, _ := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{
//		Name: "openai", Provider: provider, Keys: keys,
//	}))
//	hc := &http.Client{Transport: client.Transport(nil)}
//	oai := openai.NewClient(option.WithHTTPClient(hc), option.WithMaxRetries(0))
//
// Setting the SDK's own retries to 0 leaves one retry layer. Left on, they do not
// multiply attempts (the transport answers an SDK's retry of a request it already retried
// without calling the upstream again), but they add the SDK's backoff sleeps. That holds
// for genai too, whose retries (HTTPOptions.RetryOptions) carry no retry header: the
// transport takes the same request again shortly after a failure for a retry of it (see
// llmclient.WithRepeatWindow).
//
//	gc, _ := genai.NewClient(ctx, &genai.ClientConfig{APIKey: key, Backend: genai.BackendGeminiAPI,
//		HTTPClient: &http.Client{Transport: client.Transport(nil)}})
package sdk
