package openai

import (
	"math/rand/v2"
	"testing"

	"github.com/llmclient/llmclient/dialect"
)

// tokenUsageAgrees fails t when ReadTokenUsage and ReadUsage disagree on body's usage.
func tokenUsageAgrees(t *testing.T, shape dialect.Shape, body []byte) {
	t.Helper()
	var p Provider
	u, ok := p.ReadTokenUsage(shape, body)
	want, _, wok := p.ReadUsage(shape, body)
	if ok != wok || u != want {
		t.Fatalf("%s %q: ReadTokenUsage %+v %v, ReadUsage %+v %v", shape, body, u, ok, want, wok)
	}
}

// ReadTokenUsage reads what ReadUsage reads, for answers as the vendors write them and
// for random bodies built from the pieces a usage object is made of.
func TestReadTokenUsageAgreesWithReadUsage(t *testing.T) {
	for _, body := range []string{
		`{"id":"c1","object":"chat.completion","model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":25,"completion_tokens":4,"total_tokens":29}}`,
		`{"model":"m","usage":{"prompt_tokens":12000,"completion_tokens":700,"total_tokens":12700,"prompt_tokens_details":{"cached_tokens":8000,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":300}}}`,
		`{"model":"m","usage":{"prompt_tokens":2.5e3}}`,
		`{"model":"m","usage":null}`,
		`{"usage":{"prompt_tokens":1},"x":{"usage":{"prompt_tokens":2}}}`,
		`{"model":"m"}`,
		``,
	} {
		for _, shape := range []dialect.Shape{ShapeChatCompletions, ShapeResponses, ShapeEmbeddings} {
			tokenUsageAgrees(t, shape, []byte(body))
		}
	}
	pieces := []string{`{`, `}`, `"usage"`, `:`, `,`, `"prompt_tokens"`, `"completion_tokens"`, `"total_tokens"`,
		`"prompt_tokens_details"`, `"cached_tokens"`, `"cache_write_tokens"`, `12`, `-3`, `null`, `"model"`, `"m"`, ` `, `"x"`, `1.5`}
	rng := rand.New(rand.NewPCG(11, 12))
	for range 20000 {
		var b []byte
		for range rng.IntN(24) {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		tokenUsageAgrees(t, ShapeChatCompletions, b)
	}
}

func FuzzReadTokenUsage(f *testing.F) {
	f.Add([]byte(`{"model":"m","usage":{"prompt_tokens":25,"completion_tokens":4,"total_tokens":29}}`))
	f.Add([]byte(`{"usage":{"prompt_tokens":1,"prompt_tokens_details":{"cached_tokens":1}}}`))
	f.Add([]byte(`{"usage":{"prompt_tokens":5.7,"completion_tokens":-1e18,"total_tokens":"x","prompt_cache_hit_tokens":92233720368547758070}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		tokenUsageAgrees(t, ShapeChatCompletions, body)
		tokenUsageAgrees(t, ShapeResponses, body)
	})
}
