package sdk_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/llmclient/llmclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newAnthropic returns an anthropic-sdk-go client that sends through rt. retries < 0 keeps
// the SDK's default (2).
func newAnthropic(base string, rt http.RoundTripper, retries int) anthropic.Client {
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithAPIKey("sk-ant-caller"),
		option.WithHTTPClient(&http.Client{Transport: rt}),
	}
	if retries >= 0 {
		opts = append(opts, option.WithMaxRetries(retries))
	}
	return anthropic.NewClient(opts...)
}

func messageParams() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 256,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello."))},
	}
}

func TestAnthropicSDKOverloadedIsRetried(t *testing.T) {
	up := newUpstream(t, reply(529, anthropic529), reply(529, anthropic529), reply(200, anthropicOK))
	base := newCounting(t)
	c := newAnthropicClient(t, up.URL)
	ant := newAnthropic(up.URL, c.Transport(base), 0)

	msg, err := ant.Messages.New(context.Background(), messageParams())
	require.NoError(t, err)
	require.Len(t, msg.Content, 1)
	assert.Equal(t, "Hello!", msg.Content[0].Text)
	got := up.requests()
	require.Len(t, got, 3)
	for _, r := range got {
		assert.Equal(t, got[0].Body, r.Body)
		assert.Equal(t, "sk-ant-caller", r.Header.Get("X-Api-Key"))
	}
	assert.True(t, base.allClosed())
}

func TestAnthropicSDKDefaultRetriesDoNotMultiply(t *testing.T) {
	up := newUpstream(t, reply(529, anthropic529))
	base := newCounting(t)
	c := newAnthropicClient(t, up.URL, llmclient.WithMaxAttempts(2))
	ant := newAnthropic(up.URL, c.Transport(base), -1)

	_, err := ant.Messages.New(context.Background(), messageParams())
	var apiErr *anthropic.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, 529, apiErr.StatusCode)
	assert.Equal(t, 2, up.count(), "2 attempts, not 2 × (1 + 2 SDK retries)")
	assert.True(t, base.allClosed())
}

// TestAnthropicSDKStreamErrorEventBeforeFirstToken: Anthropic reports overload inside a
// 200 stream; before the first token the transport retries it, and the SDK never knows.
func TestAnthropicSDKStreamErrorEventBeforeFirstToken(t *testing.T) {
	good := events(anthropicStart, anthropicPing, anthropicBlock, anthropicText("Hel"), anthropicText("lo!"), anthropicStop, anthropicDelta2, anthropicEnd)
	up := newUpstream(t, events(anthropicStart, anthropicPing, anthropicError), stall(anthropicStart), good)
	base := newCounting(t)
	c := newAnthropicClient(t, up.URL, llmclient.WithFirstTokenTimeout(200*time.Millisecond))
	ant := newAnthropic(up.URL, c.Transport(base), 0)

	stream := ant.Messages.NewStreaming(context.Background(), messageParams())
	var msg anthropic.Message
	for stream.Next() {
		require.NoError(t, msg.Accumulate(stream.Current()))
	}
	require.NoError(t, stream.Err())
	require.NoError(t, stream.Close())
	require.Len(t, msg.Content, 1)
	assert.Equal(t, "Hello!", msg.Content[0].Text)
	assert.Equal(t, int64(2), msg.Usage.OutputTokens)
	assert.Equal(t, 3, up.count(), "error event, then stall, then success")
	assert.True(t, base.allClosed())
	assert.Equal(t, 0, c.InFlight("anthropic"))
}
