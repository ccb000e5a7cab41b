package sdk_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A call the breaker refuses reaches openai-go as its own error type, a 503 with the
// breaker's remaining open time as Retry-After: the SDK user's error handling does not
// change when the Client answers instead of the upstream.
func TestOpenAIGoOpenBreakerIsAnOpenAIError(t *testing.T) {
	up := newUpstream(t, reply(500, `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`))
	c := newOpenAIClient(t, up.URL+"/v1", nil, llmclient.WithMaxAttempts(1),
		llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 2, OpenTimeout: time.Minute}))
	oai := newOpenAI(up.URL+"/v1", c.Transport(newCounting(t), llmclient.WithRepeatWindow(0)), 0)
	for range 2 {
		_, err := oai.Chat.Completions.New(context.Background(), chatParams())
		var apiErr *openai.Error
		require.ErrorAs(t, err, &apiErr)
		assert.Equal(t, 500, apiErr.StatusCode)
	}
	_, err := oai.Chat.Completions.New(context.Background(), chatParams())
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr, "a local refusal keeps the SDK's error type")
	assert.Equal(t, http.StatusServiceUnavailable, apiErr.StatusCode)
	assert.Equal(t, "circuit_open", apiErr.Code)
	assert.Equal(t, "60", apiErr.Response.Header.Get("Retry-After"))
	assert.Equal(t, "unavailable", apiErr.Response.Header.Get("X-Llmclient-Class"))
	assert.Equal(t, 2, up.count(), "the breaker answered, the upstream was spared")
}

// A key cooling down after a 429 refuses the next call locally: openai-go gets a 429 of
// its own error type with the wait left as Retry-After.
func TestOpenAIGoLocalRateLimitIsAnOpenAIError(t *testing.T) {
	up := newUpstream(t, reply(429, openai429, "Retry-After", "30"), reply(200, openaiOK))
	c := newOpenAIClient(t, up.URL+"/v1", []string{"sk-pool"}, llmclient.WithMaxAttempts(1))
	oai := newOpenAI(up.URL+"/v1", c.Transport(newCounting(t), llmclient.WithRepeatWindow(0)), 0)
	_, err := oai.Chat.Completions.New(context.Background(), chatParams())
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 429, apiErr.StatusCode)
	assert.Empty(t, apiErr.Response.Header.Get("X-Llmclient-Class"), "the upstream's own answer")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = oai.Chat.Completions.New(ctx, chatParams())
	require.ErrorAs(t, err, &apiErr, "a local refusal keeps the SDK's error type")
	assert.Equal(t, http.StatusTooManyRequests, apiErr.StatusCode)
	assert.Equal(t, "keys_cooling", apiErr.Code)
	assert.Equal(t, "unavailable", apiErr.Response.Header.Get("X-Llmclient-Class"))
	assert.NotEmpty(t, apiErr.Response.Header.Get("Retry-After"))
	assert.Equal(t, 1, up.count())
}

// anthropic-sdk-go gets its own error type for an open breaker too.
func TestAnthropicSDKOpenBreakerIsAnAnthropicError(t *testing.T) {
	up := newUpstream(t, reply(500, `{"type":"error","error":{"type":"api_error","message":"boom"}}`))
	c := newAnthropicClient(t, up.URL, llmclient.WithMaxAttempts(1),
		llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute}))
	cl := newAnthropic(up.URL, c.Transport(newCounting(t), llmclient.WithRepeatWindow(0)), 0)
	_, err := cl.Messages.New(context.Background(), messageParams())
	require.Error(t, err)
	_, err = cl.Messages.New(context.Background(), messageParams())
	var apiErr *anthropic.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusServiceUnavailable, apiErr.StatusCode)
	assert.False(t, errors.Is(err, llmclient.ErrCircuitOpen))
	assert.Equal(t, 1, up.count())
}
