package openai_test

import (
	"context"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/openai"
)

// ccCacheWrite is a Chat Completions body whose usage reports cache writes:
// CompletionUsage.prompt_tokens_details.cache_write_tokens (openai-openapi.yaml), a part
// of prompt_tokens as cached_tokens is.
const ccCacheWrite = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-6-astra",
"choices":[{"index":0,"message":{"role":"assistant","content":"Hi","refusal":null},"finish_reason":"stop"}],
"usage":{"prompt_tokens":5000,"completion_tokens":10,"total_tokens":5010,
 "prompt_tokens_details":{"cached_tokens":1000,"audio_tokens":0,"cache_write_tokens":3000},
 "completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`

// wantCacheWrite is the usage of ccCacheWrite and respCacheWrite: the whole prompt as
// InputTokens (the vendor's count, which includes the cache reads and writes, not added
// again), the reads and the writes as its parts.
var wantCacheWrite = llmclient.Usage{InputTokens: 5000, OutputTokens: 10, TotalTokens: 5010,
	CachedInputTokens: 1000, CacheWriteTokens: 3000}

func checkCacheWrite(t *testing.T, where string, got llmclient.Usage) {
	t.Helper()
	if got != wantCacheWrite {
		t.Errorf("%s: usage %+v, want %+v", where, got, wantCacheWrite)
	}
}

// TestChatCacheWriteTokens checks that a one-shot answer and the transport's usage
// readers take cache_write_tokens as Usage.CacheWriteTokens: the plain reader, and the
// scanner that reads the bodies it does not (here a count written as a fraction).
func TestChatCacheWriteTokens(t *testing.T) {
	p := newProvider(t, newUpstream(t, reply{Body: ccCacheWrite}))
	checkCacheWrite(t, "Complete", providertest.Complete(t, p, simpleCall("gpt-6-astra")).Usage)
	scanned := strings.Replace(ccCacheWrite, `"accepted_prediction_tokens":0`, `"accepted_prediction_tokens":0.0`, 1)
	escaped := strings.Replace(ccCacheWrite, `"cache_write_tokens"`, `"cache\u005fwrite_tokens"`, 1)
	for name, body := range map[string]string{"plain": ccCacheWrite, "scanned": scanned, "escaped key": escaped} {
		u, model, ok := p.ReadUsage(openai.ShapeChatCompletions, []byte(body))
		if !ok || model != "gpt-6-astra" {
			t.Errorf("ReadUsage (%s): ok %v, model %q", name, ok, model)
		}
		checkCacheWrite(t, "ReadUsage ("+name+")", u)
		u, ok = p.ReadTokenUsage(openai.ShapeChatCompletions, []byte(body))
		if !ok {
			t.Errorf("ReadTokenUsage (%s): not ok", name)
		}
		checkCacheWrite(t, "ReadTokenUsage ("+name+")", u)
	}
}

// TestChatStreamCacheWriteTokens checks the same count in the include_usage chunk.
func TestChatStreamCacheWriteTokens(t *testing.T) {
	body := `data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-6-astra","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}],"usage":null}

data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-6-astra","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}

data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-6-astra","choices":[],"usage":{"prompt_tokens":5000,"completion_tokens":10,"total_tokens":5010,"prompt_tokens_details":{"cached_tokens":1000,"cache_write_tokens":3000},"completion_tokens_details":{"reasoning_tokens":0}}}

data: [DONE]

`
	u := newUpstream(t, reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: body})
	checkCacheWrite(t, "stream", streamUsage(t, newProvider(t, u)))
}

// streamUsage streams simpleCall to its end and returns the last usage it reported.
func streamUsage(t *testing.T, p *openai.Provider) llmclient.Usage {
	t.Helper()
	st, err := p.Stream(context.Background(), simpleCall("gpt-6-astra"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var usage *llmclient.Usage
	for {
		c, err := st.Recv()
		if err != nil {
			break
		}
		if c.Usage != nil {
			usage = c.Usage
		}
	}
	if usage == nil {
		t.Fatal("the stream reported no usage")
	}
	return *usage
}

// gpt6AstraCost is what a gpt-6-astra answer costs in the default table ($10 a million
// input tokens, $1 cache reads, $12.50 cache writes, $50 output), counts in tokens.
func gpt6AstraCost(input, read, write, output pricing.Money) pricing.Money {
	return (input*10*pricing.Dollar + read*pricing.Dollar + write*125*pricing.Dollar/10 + output*50*pricing.Dollar) / 1_000_000
}

// clientCost returns what a Client with the default price table reports a gpt-6-astra
// call cost whose answer is body.
func clientCost(t *testing.T, body string, opts ...openai.Option) pricing.Cost {
	t.Helper()
	p := newProvider(t, newUpstream(t, reply{Body: body}), opts...)
	c, err := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{Name: "openai", Provider: p}),
		llmclient.WithPricing(pricing.Default()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.Complete(context.Background(), &llmclient.Request{Model: "gpt-6-astra",
		Messages: []llmclient.Message{llmclient.UserMessage("Hello")}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Cost
}

// TestChatCacheWritesPriced checks that a Client prices the cache writes a Chat
// Completions answer reports at the model's cache_write_mtok, the reads at
// cache_read_mtok and only the rest of the prompt at input_mtok, so that the same tokens
// without writes cost less.
func TestChatCacheWritesPriced(t *testing.T) {
	noWrites := strings.Replace(ccCacheWrite, `"cache_write_tokens":3000`, `"cache_write_tokens":0`, 1)
	with, without := clientCost(t, ccCacheWrite), clientCost(t, noWrites)
	if want := gpt6AstraCost(1000, 1000, 3000, 10); !with.Known || with.Estimated || with.Amount != want {
		t.Errorf("with cache writes: cost %v (%+v), want %v", with, with, want)
	}
	if want := gpt6AstraCost(4000, 1000, 0, 10); !without.Known || without.Estimated || without.Amount != want {
		t.Errorf("without cache writes: cost %v (%+v), want %v", without, without, want)
	}
}
