package sdk_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/llmclient/llmclient"
	anthropicp "github.com/llmclient/llmclient/provider/anthropic"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The transport continues a committed stream that breaks on the next upstream, and the
// SDK reads one stream: these tests run the real SDKs against a loopback upstream that cuts
// after a few chunks.

// openaiUsage is a chat completion stream's usage chunk.
func openaiUsage(in, out int) string {
	return `data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":9,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":` +
		itoa(in) + `,"completion_tokens":` + itoa(out) + `,"total_tokens":` + itoa(in+out) + "}}\n\n"
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// fallbackChunk is a chunk of the fallback's own stream, under its own id.
func fallbackChunk(text string) string {
	return strings.ReplaceAll(openaiChunk(text), "chatcmpl-2", "chatcmpl-9")
}

// newOpenAIPair is a Client whose model gpt-4o-mini is served by primary, then secondary.
func newOpenAIPair(t *testing.T, primary, secondary string, opts ...llmclient.Option) *llmclient.Client {
	t.Helper()
	c, err := llmclient.New(append([]llmclient.Option{
		llmclient.WithUpstream(llmclient.Upstream{Name: "primary", Provider: mustOpenAIProvider(t, primary)}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "secondary", Provider: mustOpenAIProvider(t, secondary)}),
		llmclient.WithModelGroup("gpt-4o-mini", "primary", "secondary"),
		llmclient.WithBackoff(5*time.Millisecond, 10*time.Millisecond)}, opts...)...)
	require.NoError(t, err)
	return c
}

func TestOpenAIGoReadsAContinuedStream(t *testing.T) {
	restart := events(strings.ReplaceAll(openaiRole, "chatcmpl-2", "chatcmpl-9"), fallbackChunk("Hel"), fallbackChunk("lo, "),
		fallbackChunk("world!"), strings.ReplaceAll(openaiStop, "chatcmpl-2", "chatcmpl-9"), openaiUsage(9, 4), openaiDone)
	prefill := events(strings.ReplaceAll(openaiRole, "chatcmpl-2", "chatcmpl-9"), fallbackChunk("world!"),
		strings.ReplaceAll(openaiStop, "chatcmpl-2", "chatcmpl-9"), openaiUsage(12, 2), openaiDone)
	for _, tt := range []struct {
		name     string
		fallback step
		prefill  bool
	}{
		{"restart and splice", restart, false},
		{"prefill", prefill, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			primary := newUpstream(t, events(openaiRole, openaiChunk("Hel"), openaiChunk("lo, ")))
			secondary := newUpstream(t, tt.fallback)
			base := newCounting(t)
			c := newOpenAIPair(t, primary.URL+"/v1", secondary.URL+"/v1", llmclient.WithPrefill("secondary", tt.prefill))
			oai := newOpenAI(primary.URL+"/v1", c.Transport(base), 0)

			params := chatParams()
			params.StreamOptions.IncludeUsage = openai.Bool(true)
			stream := oai.Chat.Completions.NewStreaming(context.Background(), params)
			var acc openai.ChatCompletionAccumulator
			roles := 0
			for stream.Next() {
				ch := stream.Current()
				require.True(t, acc.AddChunk(ch), "a consistent chunk")
				for _, c := range ch.Choices {
					if c.Delta.Role != "" {
						roles++
					}
				}
			}
			require.NoError(t, stream.Err())
			require.NoError(t, stream.Close())
			require.Len(t, acc.Choices, 1)
			assert.Equal(t, "Hello, world!", acc.Choices[0].Message.Content)
			assert.Equal(t, "stop", acc.Choices[0].FinishReason)
			assert.Equal(t, "chatcmpl-2", acc.ID, "the first stream's id")
			assert.Equal(t, int64(1), acc.Created, "the first stream's created")
			assert.Equal(t, 1, roles)
			assert.Greater(t, acc.Usage.PromptTokens, int64(9), "summed over both attempts")
			if tt.prefill {
				got := secondary.requests()
				require.Len(t, got, 1)
				assert.Contains(t, got[0].Body, `{"role":"assistant","content":"Hello, "}`)
			}
			assert.True(t, base.allClosed())
			assert.Equal(t, 0, c.InFlight("primary")+c.InFlight("secondary"))
		})
	}
}

func TestOpenAIGoContinuedStreamThatDivergesIsAnError(t *testing.T) {
	primary := newUpstream(t, events(openaiRole, openaiChunk("Hel"), openaiChunk("lo, ")))
	secondary := newUpstream(t, events(openaiRole, fallbackChunk("Good"), fallbackChunk("bye."), openaiStop, openaiDone))
	c := newOpenAIPair(t, primary.URL+"/v1", secondary.URL+"/v1")
	oai := newOpenAI(primary.URL+"/v1", c.Transport(newCounting(t)), 0)

	stream := oai.Chat.Completions.NewStreaming(context.Background(), chatParams())
	var text strings.Builder
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	err := stream.Err()
	_ = stream.Close()
	require.Error(t, err)
	assert.True(t, errors.Is(err, llmclient.ErrContinuationDiverged), "got %v", err)
	assert.Equal(t, "Hello, ", text.String(), "never duplicated or mixed text")
}

// newAnthropicPair is a Client whose model claude-sonnet-4-5 is served by primary, then
// secondary.
func newAnthropicPair(t *testing.T, primary, secondary string, opts ...llmclient.Option) *llmclient.Client {
	t.Helper()
	var ups []llmclient.Option
	for _, u := range []struct{ name, base string }{{"primary", primary}, {"secondary", secondary}} {
		p, err := anthropicp.New(anthropicp.WithBaseURL(u.base))
		require.NoError(t, err)
		ups = append(ups, llmclient.WithUpstream(llmclient.Upstream{Name: u.name, Provider: p}))
	}
	c, err := llmclient.New(append(append(ups, llmclient.WithModelGroup("claude-sonnet-4-5", "primary", "secondary"),
		llmclient.WithBackoff(5*time.Millisecond, 10*time.Millisecond)), opts...)...)
	require.NoError(t, err)
	return c
}

func TestAnthropicSDKReadsAContinuedStream(t *testing.T) {
	start2 := strings.ReplaceAll(anthropicStart, "msg_2", "msg_9")
	delta := "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":5}}\n\n"
	for _, tt := range []struct {
		name     string
		fallback step
		prefill  bool
	}{
		{"restart and splice", events(start2, anthropicBlock, anthropicText("Hel"), anthropicText("lo, world!"), anthropicStop, delta, anthropicEnd), false},
		{"prefill", events(start2, anthropicBlock, anthropicText("world!"), anthropicStop, delta, anthropicEnd), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			primary := newUpstream(t, events(anthropicStart, anthropicPing, anthropicBlock, anthropicText("Hel"), anthropicText("lo, ")))
			secondary := newUpstream(t, tt.fallback)
			base := newCounting(t)
			c := newAnthropicPair(t, primary.URL, secondary.URL, llmclient.WithPrefill("secondary", tt.prefill))
			ant := newAnthropic(primary.URL, c.Transport(base), 0)

			stream := ant.Messages.NewStreaming(context.Background(), messageParams())
			var msg anthropic.Message
			starts := 0
			for stream.Next() {
				ev := stream.Current()
				if ev.Type == "message_start" {
					starts++
				}
				require.NoError(t, msg.Accumulate(ev))
			}
			require.NoError(t, stream.Err())
			require.NoError(t, stream.Close())
			assert.Equal(t, 1, starts)
			assert.Equal(t, "msg_2", msg.ID, "the first stream's message")
			require.Len(t, msg.Content, 1, "the splice continues the text block")
			assert.Equal(t, "Hello, world!", msg.Content[0].Text)
			assert.Equal(t, anthropic.StopReasonEndTurn, msg.StopReason)
			assert.Greater(t, msg.Usage.OutputTokens, int64(5), "summed over both attempts")
			assert.True(t, base.allClosed())
			assert.Equal(t, 0, c.InFlight("primary")+c.InFlight("secondary"))
		})
	}
}

func TestAnthropicSDKContinuedStreamThatDivergesIsAnError(t *testing.T) {
	primary := newUpstream(t, events(anthropicStart, anthropicBlock, anthropicText("Hel"), anthropicText("lo, ")))
	secondary := newUpstream(t, events(anthropicStart, anthropicBlock, anthropicText("Goodbye."), anthropicStop, anthropicDelta2, anthropicEnd))
	c := newAnthropicPair(t, primary.URL, secondary.URL)
	ant := newAnthropic(primary.URL, c.Transport(newCounting(t)), 0)

	stream := ant.Messages.NewStreaming(context.Background(), messageParams())
	var msg anthropic.Message
	for stream.Next() {
		require.NoError(t, msg.Accumulate(stream.Current()))
	}
	err := stream.Err()
	_ = stream.Close()
	require.Error(t, err)
	assert.True(t, errors.Is(err, llmclient.ErrContinuationDiverged), "got %v", err)
	require.Len(t, msg.Content, 1)
	assert.Equal(t, "Hello, ", msg.Content[0].Text, "never duplicated or mixed text")
}
