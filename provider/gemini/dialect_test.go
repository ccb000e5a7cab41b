package gemini_test

import (
	"net/http"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/gemini"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newDialect(t testing.TB, opts ...gemini.Option) *gemini.Provider {
	t.Helper()
	p, err := gemini.New(opts...)
	require.NoError(t, err)
	return p
}

func TestDialectBaseURL(t *testing.T) {
	assert.Equal(t, "https://generativelanguage.googleapis.com", newDialect(t).BaseURL())
	assert.Equal(t, "http://127.0.0.1:9/gw", newDialect(t, gemini.WithBaseURL("http://127.0.0.1:9/gw")).BaseURL())
	assert.Equal(t, "https://us-central1-aiplatform.googleapis.com", newDialect(t, gemini.WithVertex("proj", "us-central1")).BaseURL())
	assert.Equal(t, "https://generativelanguage.googleapis.com", newDialect(t, gemini.WithAPIVersion("v1alpha")).BaseURL())
}

func TestDialectInspect(t *testing.T) {
	p := newDialect(t)
	body := []byte(`{"systemInstruction":{"parts":[{"text":"Be brief."}]},
		"contents":[{"role":"user","parts":[{"text":"What is this?"},{"inlineData":{"mimeType":"image/png","data":"AAAA"}}]},
			{"role":"model","parts":[{"functionCall":{"name":"look","args":{"q":1}}}]},
			{"role":"user","parts":[{"functionResponse":{"name":"look","response":{"out":"a cat"}}}]}],
		"tools":[{"functionDeclarations":[{"name":"look","description":"Look.","parametersJsonSchema":{"type":"object"}}]}],
		"generationConfig":{"maxOutputTokens":300,"responseJsonSchema":{"type":"object"}}}`)
	tests := []struct {
		path   string
		ok     bool
		shape  dialect.Shape
		stream bool
		model  string
	}{
		{"/v1beta/models/gemini-2.5-flash:generateContent", true, gemini.ShapeGenerateContent, false, "gemini-2.5-flash"},
		{"/v1/models/gemini-2.5-pro:streamGenerateContent", true, gemini.ShapeStreamGenerateContent, true, "gemini-2.5-pro"},
		{"/v1/projects/p/locations/l/publishers/google/models/gemini-2.0-flash:generateContent", true, gemini.ShapeGenerateContent, false, "gemini-2.0-flash"},
		{"/v1beta/models/gemini-2.5-flash:countTokens", false, "", false, ""},
		{"/v1beta/models/gemini-2.5-flash", false, "", false, ""},
		{"/v1beta/models", false, "", false, ""},
		{"/v1beta/tunedModels/x:generateContent", false, "", false, ""},
	}
	for _, tt := range tests {
		call, ok := p.Inspect("POST", tt.path, body)
		require.Equal(t, tt.ok, ok, tt.path)
		if !ok {
			continue
		}
		assert.Equal(t, tt.shape, call.Shape, tt.path)
		assert.Equal(t, tt.stream, call.Stream, tt.path)
		assert.Equal(t, tt.model, call.Request.Model, tt.path)
		assert.Equal(t, 300, call.Request.MaxTokens)
		assert.Len(t, call.Request.Messages, 4, "system, user, model, function response")
		assert.Len(t, call.Request.Tools, 1)
		assert.NotNil(t, call.Request.ResponseFormat)
	}
	_, ok := p.Inspect("GET", "/v1beta/models/gemini-2.5-flash:generateContent", nil)
	assert.False(t, ok)
	call, ok := p.Inspect("POST", "/v1beta/models/m:generateContent", []byte("not json"))
	require.True(t, ok)
	assert.Equal(t, "m", call.Request.Model)
}

// TestDialectInspectOddMaxTokens checks the shared body reader: a maxOutputTokens that is
// not an integer makes Inspect read nothing from the body but does not fail an estimate,
// and a null one reads as 0.
func TestDialectInspectOddMaxTokens(t *testing.T) {
	p := newDialect(t)
	const path = "/v1beta/models/m:generateContent"
	for _, tt := range []struct {
		max       string
		maxTokens int
		messages  int
	}{
		{`"12"`, 0, 0},
		{`1.5`, 0, 0},
		{`1e2`, 0, 0},
		{`true`, 0, 0},
		{`{}`, 0, 0},
		{`[1]`, 0, 0},
		{`99999999999999999999`, 0, 0},
		{`null`, 0, 1},
		{`-0`, 0, 1},
		{`12`, 12, 1},
		{`-3`, -3, 1},
	} {
		body := []byte(`{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":` + tt.max + `}}`)
		call, ok := p.Inspect("POST", path, body)
		require.True(t, ok)
		assert.Equal(t, "m", call.Request.Model, tt.max)
		assert.Equal(t, tt.maxTokens, call.Request.MaxTokens, tt.max)
		assert.Len(t, call.Request.Messages, tt.messages, tt.max)
		n, err := gemini.EstimateBodyTokens(body, nil)
		require.NoError(t, err, tt.max)
		assert.Positive(t, n, tt.max)
	}
}

func TestDialectAuthorize(t *testing.T) {
	h := http.Header{"X-Goog-Api-Key": {"caller"}, "Authorization": {"Bearer caller"}}
	newDialect(t).Authorize(h, "pool")
	assert.Equal(t, "pool", h.Get("X-Goog-Api-Key"))
	assert.Empty(t, h.Get("Authorization"))

	h = http.Header{"X-Goog-Api-Key": {"caller"}}
	newDialect(t, gemini.WithVertex("p", "global"), gemini.WithAPIKey("token")).Authorize(h, "")
	assert.Equal(t, "Bearer token", h.Get("Authorization"))
	assert.Empty(t, h.Get("X-Goog-Api-Key"))

	assert.Nil(t, newDialect(t).RateLimits(http.Header{}))
	e := newDialect(t).ClassifyError(429, nil, []byte(`{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}}`))
	assert.Equal(t, failure.RateLimited, e.Class)
}

func FuzzDialectInspect(f *testing.F) {
	p := newDialect(f)
	f.Add("/v1beta/models/g:generateContent", []byte(`{"contents":[{"parts":[{"text":"hi"}]}]}`))
	f.Add("/v1/models/g:streamGenerateContent", []byte(`{"generationConfig":{"maxOutputTokens":"x"}}`))
	f.Add("/v1/models/:generateContent", []byte(`{}`))
	f.Add("/v1beta/models/e:batchEmbedContents", []byte(`{"requests":[{"content":{"parts":[{"text":"a"},{"inlineData":{}}]}}]}`))
	f.Add("/v1beta/models/e:embedContent", []byte(`{"content":null,"requests":null}`))
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		call, ok := p.Inspect("POST", path, body)
		if !ok {
			return
		}
		if call.Request.Model == "" || call.Shape == "" {
			t.Fatalf("recognized without a model or shape: %q -> %+v", path, call)
		}
		if call.NoOutput != (call.Shape == gemini.ShapeEmbedContent || call.Shape == gemini.ShapeBatchEmbedContents) {
			t.Fatalf("NoOutput %v for shape %s", call.NoOutput, call.Shape)
		}
		_ = llmclient.EstimatePromptTokens(nil, &call.Request)
	})
}

func TestDialectInspectEmbed(t *testing.T) {
	p, err := gemini.New()
	if err != nil {
		t.Fatal(err)
	}
	call, ok := p.Inspect("POST", "/v1beta/models/gemini-embedding-001:batchEmbedContents",
		[]byte(`{"requests":[{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"first"}]}},{"content":{"parts":[{"text":"second"}]}}]}`))
	if !ok || call.Shape != gemini.ShapeBatchEmbedContents || !call.NoOutput || call.Stream || call.Request.Model != "gemini-embedding-001" ||
		len(call.Request.Messages) != 2 || call.Request.Messages[1].Text() != "second" {
		t.Errorf("batch: %+v, %v", call, ok)
	}
	call, ok = p.Inspect("POST", "/v1beta/models/e:embedContent", []byte(`{"content":{"parts":[{"text":"one"}]}}`))
	if !ok || call.Shape != gemini.ShapeEmbedContent || len(call.Request.Messages) != 1 || call.Request.Messages[0].Text() != "one" {
		t.Errorf("one: %+v, %v", call, ok)
	}
	if call, ok = p.Inspect("POST", "/v1beta/models/e:embedContent", []byte(`{`)); !ok || len(call.Request.Messages) != 0 {
		t.Errorf("bad body: %+v, %v", call, ok)
	}
}
