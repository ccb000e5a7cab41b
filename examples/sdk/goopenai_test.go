package sdk_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	goopenai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newGoOpenAI returns a go-openai client that sends through rt. go-openai has no retries
// of its own.
func newGoOpenAI(base string, rt http.RoundTripper) *goopenai.Client {
	cfg := goopenai.DefaultConfig("sk-caller")
	cfg.BaseURL = base
	cfg.HTTPClient = &http.Client{Transport: rt}
	return goopenai.NewClientWithConfig(cfg)
}

func goRequest() goopenai.ChatCompletionRequest {
	return goopenai.ChatCompletionRequest{
		Model:    "gpt-4o-mini",
		Messages: []goopenai.ChatCompletionMessage{{Role: goopenai.ChatMessageRoleUser, Content: "Say hello."}},
	}
}

func TestGoOpenAIRetriesAndKeepsTheSDKTypes(t *testing.T) {
	up := newUpstream(t, reply(429, openai429, "Retry-After-Ms", "10"), reply(503, openai503), reply(200, openaiOK))
	base := newCounting(t)
	c := newOpenAIClient(t, up.URL+"/v1", nil)
	cl := newGoOpenAI(up.URL+"/v1", c.Transport(base))

	resp, err := cl.CreateChatCompletion(context.Background(), goRequest())
	require.NoError(t, err)
	assert.Equal(t, "Hello!", resp.Choices[0].Message.Content)
	assert.Equal(t, 3, up.count())
	assert.True(t, base.allClosed())

	// When every attempt fails, the SDK's own error type carries the upstream's answer.
	down := newUpstream(t, reply(400, `{"error":{"message":"bad model","type":"invalid_request_error","param":"model","code":"model_not_found"}}`))
	c2 := newOpenAIClient(t, down.URL+"/v1", nil)
	_, err = newGoOpenAI(down.URL+"/v1", c2.Transport(newCounting(t))).CreateChatCompletion(context.Background(), goRequest())
	var apiErr *goopenai.APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, 400, apiErr.HTTPStatusCode)
	assert.Equal(t, 1, down.count(), "a bad request is not retried")
}

func TestGoOpenAIStalledStreamIsRetried(t *testing.T) {
	up := newUpstream(t, stall(": keep-alive\n\n"), events(openaiRole, openaiChunk("Hel"), openaiChunk("lo!"), openaiStop, openaiDone))
	base := newCounting(t)
	c := newOpenAIClient(t, up.URL+"/v1", nil, llmclient.WithFirstTokenTimeout(200*time.Millisecond))
	cl := newGoOpenAI(up.URL+"/v1", c.Transport(base))

	req := goRequest()
	req.Stream = true
	stream, err := cl.CreateChatCompletionStream(context.Background(), req)
	require.NoError(t, err)
	var text strings.Builder
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if len(r.Choices) > 0 {
			text.WriteString(r.Choices[0].Delta.Content)
		}
	}
	require.NoError(t, stream.Close())
	assert.Equal(t, "Hello!", text.String())
	assert.Equal(t, 2, up.count())
	assert.True(t, base.allClosed())
}

func TestGoOpenAIBreakerOpens(t *testing.T) {
	up := newUpstream(t, reply(502, "<html>Bad Gateway</html>"))
	c := newOpenAIClient(t, up.URL+"/v1", nil, llmclient.WithMaxAttempts(1),
		llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 2, OpenTimeout: time.Minute}))
	// Two independent calls that happen to be identical: repeat detection off, or the
	// second would count as a retry of the first (see llmclient.WithRepeatWindow).
	cl := newGoOpenAI(up.URL+"/v1", c.Transport(newCounting(t), llmclient.WithRepeatWindow(0)))
	for range 2 {
		_, err := cl.CreateChatCompletion(context.Background(), goRequest())
		require.Error(t, err)
	}
	_, err := cl.CreateChatCompletion(context.Background(), goRequest())
	var apiErr *goopenai.APIError
	require.ErrorAs(t, err, &apiErr, "the breaker answers in the vendor's format")
	assert.Equal(t, 503, apiErr.HTTPStatusCode)
	assert.Equal(t, "circuit_open", apiErr.Code)
	assert.Equal(t, 2, up.count())
}
