package pricing_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient/pricing"
)

func TestLookup(t *testing.T) {
	cases := []struct {
		name            string
		provider, model string
		want            string // "provider/id" of the match, "" for none
	}{
		{"by id", "openai", "gpt-4o-mini", "openai/gpt-4o-mini"},
		{"dated alias", "openai", "gpt-4o-mini-2024-07-18", "openai/gpt-4o-mini"},
		{"case and spaces", " OpenAI ", " GPT-4o-Mini-2024-07-18\t", "openai/gpt-4o-mini"},
		{"starts_with", "anthropic", "claude-sonnet-4-5-20250929", "anthropic/claude-sonnet-4-5"},
		{"no provider: model_match openai", "", "gpt-4o", "openai/gpt-4o"},
		{"no provider: model_match regex ^o[134]", "", "o3-mini-2025-01-31", "openai/o3-mini"},
		{"no provider: model_match anthropic", "", "claude-haiku-4-5", "anthropic/claude-haiku-4-5"},
		{"no provider: model_match google", "", "gemini-2.5-flash", "google/gemini-2.5-flash"},
		{"no provider: model_match deepseek", "", "deepseek-chat", "deepseek/deepseek-chat"},
		{"no provider: mistral's lookahead regex", "", "mistral-large-latest", "mistral/mistral-large"},
		{"no provider: the lookahead excludes a prefix with a slash", "", "mistralai/mistral-large", ""},
		{"no provider claims the name", "", "llama-3.3-70b-versatile", ""},
		{"the provider does", "groq", "llama-3.3-70b-versatile", "groq/llama-3.3-70b-versatile"},
		{"regex lookahead: gemini-2.5-pro excludes -tts", "google", "gemini-2.5-pro-preview-tts", "google/gemini-2.5-pro-tts"},
		{"regex lookahead, upper case", "google", "Gemini-2.5-Pro-Preview-TTS", "google/gemini-2.5-pro-tts"},
		{"regex lookahead lets the rest through", "google", "gemini-2.5-pro-preview-06-05", "google/gemini-2.5-pro"},
		{"provider_match alias gemini", "gemini", "gemini-2.5-flash", "google/gemini-2.5-flash"},
		{"provider_match alias vertex", "Vertex_AI", "gemini-2.5-flash", "google/gemini-2.5-flash"},
		{"provider_match alias xai", "xai", "grok-4", "x-ai/grok-4-0709"},
		{"provider_match alias bedrock", "bedrock", "anthropic.claude-3-haiku-20240307-v1:0", "aws/regional.anthropic.claude-3-haiku-20240307-v1:0"},
		{"fallback provider", "azure", "gpt-4o", "openai/gpt-4o"},
		{"fallback provider, second in the list", "azure", "claude-opus-4-1", "anthropic/claude-opus-4-1"},
		{"dashed date retry", "openai", "gpt-4o-20240806", "openai/gpt-4o"},
		{"litellm with a provider prefix", "litellm", "anthropic/claude-3-5-sonnet-20241022", "anthropic/claude-3-5-sonnet"},
		{"litellm without one", "LiteLLM", "gpt-4o", "openai/gpt-4o"},
		{"unknown model", "openai", "gpt-nonexistent-9", ""},
		{"unknown provider", "my-vllm", "gpt-4o", ""},
		{"empty", "", "", ""},
		{"too long", "openai", "gpt-4o" + strings.Repeat("x", pricing.MaxNameLen), ""},
		{"too long provider", strings.Repeat("p", pricing.MaxNameLen+1), "gpt-4o", ""},
	}
	tb := pricing.Default()
	for _, c := range cases {
		for round := range 2 { // the second round is served from the cache
			m, ok := tb.Lookup(c.provider, c.model)
			if c.want == "" {
				assert.False(t, ok, "%s: Lookup(%q, %q) = %v", c.name, c.provider, c.model, m)
				assert.Nil(t, m)
				continue
			}
			if assert.True(t, ok, "%s (round %d)", c.name, round) {
				assert.Equal(t, c.want, m.String(), c.name)
			}
		}
	}
}

func TestLookupSharesModels(t *testing.T) {
	tb := pricing.Default()
	a, _ := tb.Lookup("openai", "gpt-4o-mini")
	b, _ := tb.Lookup("", "GPT-4O-MINI-2024-07-18")
	assert.Same(t, a, b)
	assert.Equal(t, "gpt 4o mini", a.Name())
	assert.Equal(t, 128_000, a.ContextWindow())
	g := lookup(t, "google", "gemini-2.5-pro")
	assert.Equal(t, 0, g.ContextWindow(), "the data has no context window for it")
}

// TestLookupCacheBounded looks up many made-up names, as an upstream could send them: the
// answers stay right across cache resets.
func TestLookupCacheBounded(t *testing.T) {
	tb, err := pricing.Load(strings.NewReader(`[{"id":"p","api_pattern":"x","models":[
		{"id":"m","match":{"starts_with":"m-"},"prices":{"input_mtok":1}}]}]`))
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 6000 {
				name := fmt.Sprintf("m-%d-%d", g, i)
				m, ok := tb.Lookup("p", name)
				if !ok || m.ID() != "m" {
					t.Errorf("Lookup(p, %s) = %v, %v", name, m, ok)
					return
				}
				if _, ok := tb.Lookup("p", "x"+name); ok {
					t.Errorf("Lookup(p, x%s) found a model", name)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestProviderForURLWithoutPattern(t *testing.T) {
	tb, err := pricing.Load(strings.NewReader(`[{"id":"nopattern","models":[]},{"id":"p","api_pattern":"https://p\\.example","models":[]}]`))
	require.NoError(t, err)
	id, ok := tb.ProviderForURL("https://p.example/v1")
	assert.True(t, ok)
	assert.Equal(t, "p", id, "a provider without api_pattern matches no URL")
	_, ok = tb.ProviderForURL("https://elsewhere.example")
	assert.False(t, ok)
}

func TestProviderForURL(t *testing.T) {
	cases := []struct{ url, want string }{
		{"https://api.openai.com/v1", "openai"},
		{"https://api.anthropic.com", "anthropic"},
		{"https://generativelanguage.googleapis.com/v1beta", "google"},
		{"https://api.deepseek.com/v1", "deepseek"},
		{"https://my-resource.openai.azure.com/openai/deployments/x", "azure"},
		{"https://openrouter.ai/api/v1", "openrouter"},
		{"https://bedrock-runtime.us-east-1.amazonaws.com", "aws"},
		{"http://127.0.0.1:8000/v1", ""},
		{"proxy/https://api.openai.com", ""}, // anchored at the start
	}
	for _, c := range cases {
		got, ok := pricing.Default().ProviderForURL(c.url)
		assert.Equal(t, c.want != "", ok, c.url)
		assert.Equal(t, c.want, got, c.url)
	}
}
