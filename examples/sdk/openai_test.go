package sdk_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newOpenAI returns an openai-go client that sends through rt. retries < 0 keeps the SDK's
// default (2).
func newOpenAI(base string, rt http.RoundTripper, retries int) openai.Client {
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithAPIKey("sk-caller"),
		option.WithHTTPClient(&http.Client{Transport: rt}),
	}
	if retries >= 0 {
		opts = append(opts, option.WithMaxRetries(retries))
	} else {
		opts = append(opts, option.WithMaxRetryDelay(20*time.Millisecond)) // keep the SDK's own sleeps short
	}
	return openai.NewClient(opts...)
}

func chatParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")},
	}
}

func TestOpenAIGo429WithRetryAfterIsAbsorbed(t *testing.T) {
	up := newUpstream(t,
		reply(429, openai429, "Retry-After-Ms", "30", "X-Ratelimit-Remaining-Requests", "0"),
		reply(200, openaiOK))
	base := newCounting(t)
	var attempts []llmclient.Event
	c := newOpenAIClient(t, up.URL+"/v1", nil, llmclient.WithObserver(func(_ context.Context, e llmclient.Event) {
		if e.Kind == event.Attempt {
			attempts = append(attempts, e)
		}
	}))
	oai := newOpenAI(up.URL+"/v1", c.Transport(base), 0)

	start := time.Now()
	resp, err := oai.Chat.Completions.New(context.Background(), chatParams())
	require.NoError(t, err)
	assert.Equal(t, "Hello!", resp.Choices[0].Message.Content)
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond, "Retry-After-Ms honoured")
	assert.Equal(t, 2, up.count())
	require.Len(t, attempts, 2)
	assert.Equal(t, failure.RateLimited, attempts[0].Class)
	assert.True(t, base.allClosed())
}

func TestOpenAIGo503IsRetriedWithTheSameBody(t *testing.T) {
	up := newUpstream(t, reply(503, openai503), reply(503, openai503), reply(503, openai503), reply(200, openaiOK))
	base := newCounting(t)
	c := newOpenAIClient(t, up.URL+"/v1", nil, llmclient.WithMaxAttempts(4))
	oai := newOpenAI(up.URL+"/v1", c.Transport(base), 0)

	resp, err := oai.Chat.Completions.New(context.Background(), chatParams())
	require.NoError(t, err)
	assert.Equal(t, "Hello!", resp.Choices[0].Message.Content)
	got := up.requests()
	require.Len(t, got, 4, "three retries")
	for _, r := range got {
		assert.Equal(t, got[0].Body, r.Body, "the body is replayed byte for byte")
		assert.Equal(t, "Bearer sk-caller", r.Header.Get("Authorization"))
	}
	assert.Contains(t, got[0].Body, `"Say hello."`)
	assert.True(t, base.allClosed())
}

// TestOpenAIGoDefaultRetriesDoNotMultiply leaves openai-go's two retries on against an
// upstream that always fails: the upstream sees the configured attempts, no more.
func TestOpenAIGoDefaultRetriesDoNotMultiply(t *testing.T) {
	tests := []struct {
		name   string
		step   step
		status int // the SDK's error carries the last upstream answer; 0: the transport's *Error
	}{
		{"503", reply(503, openai503), 503},
		{"429 with Retry-After", reply(429, openai429, "Retry-After-Ms", "5"), 429},
		{"connection cut", func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := newUpstream(t, tt.step)
			base := newCounting(t)
			c := newOpenAIClient(t, up.URL+"/v1", nil, llmclient.WithMaxAttempts(3))
			oai := newOpenAI(up.URL+"/v1", c.Transport(base), -1)

			_, err := oai.Chat.Completions.New(context.Background(), chatParams())
			require.Error(t, err)
			assert.Equal(t, 3, up.count(), "3 attempts, not 3 × (1 + 2 SDK retries)")
			if tt.status != 0 {
				var apiErr *openai.Error
				require.ErrorAs(t, err, &apiErr, "X-Should-Retry: false stops the SDK with the real answer")
				assert.Equal(t, tt.status, apiErr.StatusCode)
			} else {
				assert.Equal(t, failure.Network, llmclient.ClassOf(err), "the SDK's retries got the same failure back: %v", err)
			}
			assert.True(t, base.allClosed())
		})
	}
}

func TestOpenAIGoBreakerOpens(t *testing.T) {
	up := newUpstream(t, reply(500, `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`))
	c := newOpenAIClient(t, up.URL+"/v1", nil, llmclient.WithMaxAttempts(1),
		llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 3, OpenTimeout: time.Minute}))
	oai := newOpenAI(up.URL+"/v1", c.Transport(newCounting(t)), 0)

	for range 3 {
		_, err := oai.Chat.Completions.New(context.Background(), chatParams())
		var apiErr *openai.Error
		require.ErrorAs(t, err, &apiErr, "the SDK's own error type for upstream errors")
		assert.Equal(t, 500, apiErr.StatusCode)
	}
	_, err := oai.Chat.Completions.New(context.Background(), chatParams())
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr, "the breaker answers in the vendor's format, the upstream is spared")
	assert.Equal(t, 503, apiErr.StatusCode)
	assert.Equal(t, "unavailable", apiErr.Response.Header.Get("X-Llmclient-Class"))
	assert.Equal(t, 3, up.count())
	assert.Equal(t, breaker.Open, c.Breaker("openai").State())
}

func TestOpenAIGoStalledStreamIsRetriedBeforeItsFirstToken(t *testing.T) {
	up := newUpstream(t,
		stall(openaiRole),
		events(openaiRole, openaiChunk("Hel"), openaiChunk("lo!"), openaiStop, openaiDone))
	base := newCounting(t)
	c := newOpenAIClient(t, up.URL+"/v1", nil, llmclient.WithFirstTokenTimeout(200*time.Millisecond))
	oai := newOpenAI(up.URL+"/v1", c.Transport(base), 0)

	stream := oai.Chat.Completions.NewStreaming(context.Background(), chatParams())
	var text strings.Builder
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	require.NoError(t, stream.Err())
	require.NoError(t, stream.Close())
	assert.Equal(t, "Hello!", text.String())
	assert.Equal(t, 2, up.count())
	assert.True(t, base.allClosed())
	assert.Equal(t, 0, c.InFlight("openai"))
}

func TestOpenAIGoStreamCutAfterFirstTokenIsAnError(t *testing.T) {
	up := newUpstream(t, events(openaiRole, openaiChunk("Hel")))
	// Without continuation (continue_test.go has the continued streams).
	c := newOpenAIClient(t, up.URL+"/v1", nil, llmclient.WithStreamContinuation(false))
	oai := newOpenAI(up.URL+"/v1", c.Transport(newCounting(t)), 0)

	stream := oai.Chat.Completions.NewStreaming(context.Background(), chatParams())
	var text strings.Builder
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	err := stream.Err()
	_ = stream.Close()
	assert.Equal(t, "Hel", text.String())
	require.Error(t, err, "a stream cut before [DONE] is not a silent success")
	assert.True(t, errors.Is(err, llmclient.ErrStreamInterrupted), "got %v", err)
	assert.Equal(t, 1, up.count())
}

func TestOpenAIGoKeyCooledDown(t *testing.T) {
	up := newUpstream(t,
		reply(429, openai429, "Retry-After", "60"),
		reply(200, openaiOK), reply(200, openaiOK))
	var cooled []llmclient.Event
	c := newOpenAIClient(t, up.URL+"/v1", []string{"sk-pool-1", "sk-pool-2"}, llmclient.WithObserver(func(_ context.Context, e llmclient.Event) {
		if e.Kind == event.KeyCooldown {
			cooled = append(cooled, e)
		}
	}))
	oai := newOpenAI(up.URL+"/v1", c.Transport(newCounting(t)), 0)

	for range 2 {
		_, err := oai.Chat.Completions.New(context.Background(), chatParams())
		require.NoError(t, err)
	}
	got := up.requests()
	require.Len(t, got, 3)
	assert.Equal(t, "Bearer sk-pool-1", got[0].Header.Get("Authorization"))
	assert.Equal(t, "Bearer sk-pool-2", got[1].Header.Get("Authorization"), "the 429'd key cools down: the retry takes the other one at once")
	assert.Equal(t, "Bearer sk-pool-2", got[2].Header.Get("Authorization"), "and so does the next call")
	for _, r := range got {
		assert.NotContains(t, r.Header.Get("Authorization"), "sk-caller", "the pool replaces the SDK's key")
	}
	require.Len(t, cooled, 1)
	assert.Equal(t, "key#1", cooled[0].Key)
}

func TestOpenAIGoFailsOverToASecondEndpoint(t *testing.T) {
	primary := newUpstream(t, reply(503, openai503))
	secondary := newUpstream(t, reply(200, openaiOK))
	pa := mustOpenAIProvider(t, primary.URL+"/v1")
	pb := mustOpenAIProvider(t, secondary.URL+"/v1")
	c, err := llmclient.New(
		llmclient.WithUpstream(llmclient.Upstream{Name: "primary", Provider: pa, Keys: []string{"sk-primary"}}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "secondary", Provider: pb, Keys: []string{"sk-secondary"}}),
		llmclient.WithModelGroup("gpt-4o-mini", "primary", "secondary"),
		llmclient.WithMaxAttempts(2), llmclient.WithBackoff(5*time.Millisecond, 10*time.Millisecond))
	require.NoError(t, err)
	oai := newOpenAI(primary.URL+"/v1", c.Transport(newCounting(t)), 0)

	resp, err := oai.Chat.Completions.New(context.Background(), chatParams())
	require.NoError(t, err)
	assert.Equal(t, "Hello!", resp.Choices[0].Message.Content)
	assert.Equal(t, 2, primary.count())
	got := secondary.requests()
	require.Len(t, got, 1)
	assert.Equal(t, "/v1/chat/completions", got[0].Path)
	assert.Equal(t, "Bearer sk-secondary", got[0].Header.Get("Authorization"))
}
