package bench

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/llmclient/llmclient"
	llmopenai "github.com/llmclient/llmclient/provider/openai"
	"github.com/llmclient/llmclient/provider/openai/openaitest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestDecodersAgree checks that the three contenders of BenchmarkStreamDecode read the same
// text from the same stream, so the benchmark compares equal work.
func TestDecodersAgree(t *testing.T) {
	in := openaitest.ChatStream(2_000)
	ctx := context.Background()
	hc := &http.Client{Transport: memoryTransport{body: in}}
	p, err := llmopenai.New(llmopenai.WithBaseURL("http://127.0.0.1:1/v1"), llmopenai.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	call := &llmclient.Call{Model: "gpt-4o", Request: &llmclient.Request{Model: "gpt-4o",
		Messages: []llmclient.Message{llmclient.UserMessage("hi")}}}
	oc := openai.NewClient(option.WithBaseURL("http://127.0.0.1:1/v1"), option.WithAPIKey("sk-test"),
		option.WithHTTPClient(hc), option.WithMaxRetries(0))
	want, err := decodeBaseline(bytes.NewReader(in))
	if err != nil || want == 0 {
		t.Fatalf("baseline: %d, %v", want, err)
	}
	got, err := decodeLLMClient(ctx, p, call)
	if err != nil || got != want {
		t.Fatalf("llmclient decoded %d bytes of text (%v), want %d", got, err, want)
	}
	got, err = decodeOpenAIGo(ctx, oc, openai.ChatCompletionNewParams{Model: "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	if err != nil || got != want {
		t.Fatalf("openai-go decoded %d bytes of text (%v), want %d", got, err, want)
	}
}
