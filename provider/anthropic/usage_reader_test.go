package anthropic_test

import (
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/anthropic"
)

func TestReadUsage(t *testing.T) {
	p, err := anthropic.New(anthropic.WithAPIKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	u, model, ok := p.ReadUsage(anthropic.ShapeMessages, []byte(`{"model":"claude-sonnet-4-5-20250929","content":[],`+
		`"usage":{"input_tokens":4000,"cache_read_input_tokens":8000,"cache_creation_input_tokens":100,"output_tokens":700}}`))
	want := llmclient.Usage{InputTokens: 12100, OutputTokens: 700, TotalTokens: 12800, CachedInputTokens: 8000, CacheWriteTokens: 100}
	if !ok || model != "claude-sonnet-4-5-20250929" || u != want {
		t.Fatalf("ReadUsage = %+v, %q, %v; want %+v", u, model, ok, want)
	}
	for _, body := range []string{`{"model":"m"}`, `not json`, `{"usage":null}`} {
		if _, _, ok := p.ReadUsage(anthropic.ShapeMessages, []byte(body)); ok {
			t.Errorf("%s: ok", body)
		}
	}
	if _, _, ok := p.ReadUsage("other", []byte(`{"usage":{"input_tokens":1}}`)); ok {
		t.Error("another shape is not read")
	}
}

func FuzzReadUsage(f *testing.F) {
	f.Add(`{"usage":{"input_tokens":9223372036854775807,"cache_read_input_tokens":1}}`)
	f.Add(`{"usage":{"input_tokens":5.7,"cache_read_input_tokens":"x","output_tokens":-1e18}}`)
	p, err := anthropic.New(anthropic.WithAPIKey("k"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) { p.ReadUsage(anthropic.ShapeMessages, []byte(body)) })
}
