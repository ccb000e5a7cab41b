package gemini_test

import (
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/gemini"
)

func TestReadUsage(t *testing.T) {
	p, err := gemini.New(gemini.WithAPIKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	u, model, ok := p.ReadUsage(gemini.ShapeGenerateContent, []byte(`{"candidates":[],"modelVersion":"gemini-2.5-flash",`+
		`"usageMetadata":{"promptTokenCount":300,"candidatesTokenCount":40,"thoughtsTokenCount":60,"cachedContentTokenCount":100,"totalTokenCount":400}}`))
	want := llmclient.Usage{InputTokens: 300, OutputTokens: 100, TotalTokens: 400, CachedInputTokens: 100, ReasoningTokens: 60}
	if !ok || model != "gemini-2.5-flash" || u != want {
		t.Fatalf("ReadUsage = %+v, %q, %v; want %+v", u, model, ok, want)
	}
	for _, body := range []string{`{"candidates":[]}`, `[{"usageMetadata":{}}]`, `{"usageMetadata":null}`} {
		if _, _, ok := p.ReadUsage(gemini.ShapeGenerateContent, []byte(body)); ok {
			t.Errorf("%s: ok", body)
		}
	}
	if _, _, ok := p.ReadUsage(gemini.ShapeStreamGenerateContent, []byte(`{"usageMetadata":{"promptTokenCount":1}}`)); ok {
		t.Error("a stream's body is not read")
	}
}

func FuzzReadUsage(f *testing.F) {
	f.Add(`{"usageMetadata":{"promptTokenCount":9223372036854775807,"toolUsePromptTokenCount":1}}`)
	f.Add(`{"usageMetadata":{"promptTokenCount":5.7,"candidatesTokenCount":"x","thoughtsTokenCount":-1e18}}`)
	p, err := gemini.New(gemini.WithAPIKey("k"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) { p.ReadUsage(gemini.ShapeGenerateContent, []byte(body)) })
}
