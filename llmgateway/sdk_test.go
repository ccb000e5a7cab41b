package llmgateway_test

import (
	"context"
	"errors"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

func TestOpenAIGoAgainstTheGateway(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, ""))
	ctx := context.Background()
	client := openai.NewClient(option.WithBaseURL(g.api.URL+"/v1"), option.WithAPIKey("gw-key-a"), option.WithMaxRetries(2))
	for _, model := range []string{"gpt-4o", "claude-sonnet"} {
		resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hi")},
		})
		if err != nil || len(resp.Choices) != 1 || resp.Choices[0].Message.Content == "" || resp.Usage.TotalTokens != 8 {
			t.Fatalf("%s: %v %+v", model, err, resp)
		}
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil || len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "Hello" ||
			acc.Choices[0].FinishReason != "stop" || acc.Usage.CompletionTokens != 2 {
			t.Fatalf("%s stream: %v %+v", model, err, acc.ChatCompletion)
		}
		stream.Close()
	}
	emb, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: "text-embedding-3-small", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b"}},
	})
	if err != nil || len(emb.Data) != 2 || emb.Data[1].Embedding[2] != 1 || emb.Data[0].Embedding[1] != -0.25 {
		t.Fatalf("embeddings: %v %+v", err, emb)
	}
	// A refusal reaches the SDK as its typed error; quota exhaustion is not retried
	// by the SDK (x-should-retry: false).
	b := openai.NewClient(option.WithBaseURL(g.api.URL+"/v1"), option.WithAPIKey("gw-key-b"), option.WithMaxRetries(2))
	_, err = b.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 403 || oe.Code != "model_not_allowed" {
		t.Fatalf("disallowed model: %v", err)
	}
	oa.setHandler(upstreamError(429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`))
	before := oa.count()
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	if !errors.As(err, &oe) || oe.StatusCode != 429 || oe.Code != "insufficient_quota" {
		t.Fatalf("quota: %v", err)
	}
	if n := oa.count() - before; n != 1 {
		t.Fatalf("the exhausted quota was called %d times", n)
	}
}

func TestAnthropicSDKAgainstTheGateway(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, ""))
	ctx := context.Background()
	client := anthropic.NewClient(aoption.WithBaseURL(g.api.URL), aoption.WithAPIKey("gw-key-a"), aoption.WithMaxRetries(0))
	for _, model := range []string{"claude-sonnet", "gpt-4o"} {
		params := anthropic.MessageNewParams{
			Model: anthropic.Model(model), MaxTokens: 64,
			System:   []anthropic.TextBlockParam{{Text: "be brief"}},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
		}
		msg, err := client.Messages.New(ctx, params)
		if err != nil || len(msg.Content) != 1 || msg.Content[0].Text == "" || msg.StopReason != "end_turn" || msg.Usage.OutputTokens != 3 {
			t.Fatalf("%s: %v %+v", model, err, msg)
		}
		stream := client.Messages.NewStreaming(ctx, params)
		var acc anthropic.Message
		for stream.Next() {
			if err := acc.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil || len(acc.Content) != 1 || acc.Content[0].Text != "Hello" || acc.StopReason != "end_turn" {
			t.Fatalf("%s stream: %v %+v", model, err, acc)
		}
		stream.Close()
	}
	bad := anthropic.NewClient(aoption.WithBaseURL(g.api.URL), aoption.WithAPIKey("unknown"), aoption.WithMaxRetries(0))
	_, err := bad.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-sonnet", MaxTokens: 5,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 401 {
		t.Fatalf("unknown key: %v", err)
	}
}
