package openai_test

import (
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/provider/openai"
)

func TestReadUsage(t *testing.T) {
	p, err := openai.New(openai.WithAPIKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		shape dialect.Shape
		body  string
		want  llmclient.Usage
		model string
		ok    bool
	}{
		{"chat", openai.ShapeChatCompletions,
			`{"model":"gpt-4o-mini-2024-07-18","choices":[],"usage":{"prompt_tokens":12000,"completion_tokens":700,"total_tokens":12700,` +
				`"prompt_tokens_details":{"cached_tokens":8000},"completion_tokens_details":{"reasoning_tokens":300}}}`,
			llmclient.Usage{InputTokens: 12000, OutputTokens: 700, TotalTokens: 12700, CachedInputTokens: 8000, ReasoningTokens: 300},
			"gpt-4o-mini-2024-07-18", true},
		{"responses", openai.ShapeResponses,
			`{"model":"o4-mini","output":[],"usage":{"input_tokens":50,"output_tokens":20,"total_tokens":70,` +
				`"input_tokens_details":{"cached_tokens":10},"output_tokens_details":{"reasoning_tokens":5}}}`,
			llmclient.Usage{InputTokens: 50, OutputTokens: 20, TotalTokens: 70, CachedInputTokens: 10, ReasoningTokens: 5}, "o4-mini", true},
		{"no usage", openai.ShapeChatCompletions, `{"model":"m","choices":[]}`, llmclient.Usage{}, "", false},
		{"not JSON", openai.ShapeChatCompletions, `data: {"x":1}`, llmclient.Usage{}, "", false},
		{"embeddings are not read", openai.ShapeEmbeddings, `{"model":"e","usage":{"prompt_tokens":3,"total_tokens":3}}`, llmclient.Usage{}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, model, ok := p.ReadUsage(tc.shape, []byte(tc.body))
			if ok != tc.ok || model != tc.model || u != tc.want {
				t.Fatalf("ReadUsage = %+v, %q, %v; want %+v, %q, %v", u, model, ok, tc.want, tc.model, tc.ok)
			}
		})
	}
}

func FuzzReadUsage(f *testing.F) {
	f.Add(`{"model":"m","usage":{"prompt_tokens":-1,"completion_tokens":9223372036854775807}}`)
	f.Add(`{"usage":null}`)
	f.Add(`{"model":"m","usage":{"prompt_tokens":5.7,"completion_tokens":-1e18,"total_tokens":"x","prompt_tokens_details":{"cached_tokens":1e400}}}`)
	f.Add(`{"model":"m","usage":{"input_tokens":1e18,"output_tokens":-0.5,"output_tokens_details":{"reasoning_tokens":null}}}`)
	p, err := openai.New(openai.WithAPIKey("k"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		for _, s := range []dialect.Shape{openai.ShapeChatCompletions, openai.ShapeResponses} {
			p.ReadUsage(s, []byte(body)) // must not panic
		}
	})
}
