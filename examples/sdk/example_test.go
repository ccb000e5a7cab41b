package sdk_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/anthropics/anthropic-sdk-go"
	antoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	antprovider "github.com/llmclient/llmclient/provider/anthropic"
	oaiprovider "github.com/llmclient/llmclient/provider/openai"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	goopenai "github.com/sashabaranov/go-openai"
)

// printAttempts is an observer that prints each attempt: upstream, key label and class.
func printAttempts(_ context.Context, e llmclient.Event) {
	if e.Kind != event.Attempt {
		return
	}
	where := e.Upstream
	if e.Key != "" {
		where += " " + e.Key
	}
	fmt.Printf("attempt %d: %s -> %s\n", e.Attempt, where, e.Class)
}

// fakeOpenAI stands in for api.openai.com: it rate-limits its first request, then answers.
func fakeOpenAI() *httptest.Server {
	var n atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After-Ms", "20")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, openai429)
			return
		}
		_, _ = io.WriteString(w, openaiOK)
	}))
}

// An openai-go client keeps its code and types; the Client's transport adds the limiter,
// classifier, Retry-After-aware retry, breaker and a key pool. The 429 cools key#1 down
// for every caller and the retry goes out at once on key#2.
func Example_openaiGo() {
	srv := fakeOpenAI() // in production: the real API, and openai.New() with no base URL
	defer srv.Close()

	provider, err := oaiprovider.New(oaiprovider.WithBaseURL(srv.URL + "/v1"))
	if err != nil {
		panic(err)
	}
	client, err := llmclient.New(
		llmclient.WithUpstream(llmclient.Upstream{
			Name: "openai", Provider: provider, Keys: []string{"sk-key-one", "sk-key-two"},
		}),
		llmclient.WithObserver(printAttempts),
	)
	if err != nil {
		panic(err)
	}

	oai := openai.NewClient(
		option.WithBaseURL(srv.URL+"/v1"),
		option.WithHTTPClient(&http.Client{Transport: client.Transport(nil)}), // the one added line
		option.WithMaxRetries(0),                                              // one retry layer: the Client's
	)
	resp, err := oai.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.Choices[0].Message.Content)
	// Output:
	// attempt 1: openai key#1 -> rate_limited
	// attempt 2: openai key#2 -> none
	// Hello!
}

// An anthropic-sdk-go stream whose first try fails with an in-band overloaded error event
// after HTTP 200: the transport retries it before the first token, and the SDK only ever
// sees the good stream.
func Example_anthropicSDK() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first := n.Add(1) == 1
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, anthropicStart)
		if first {
			_, _ = io.WriteString(w, anthropicError)
			return
		}
		for _, e := range []string{anthropicBlock, anthropicText("Hello"), anthropicText("!"), anthropicStop, anthropicDelta2, anthropicEnd} {
			_, _ = io.WriteString(w, e)
		}
	}))
	defer srv.Close()

	provider, err := antprovider.New(antprovider.WithBaseURL(srv.URL))
	if err != nil {
		panic(err)
	}
	client, err := llmclient.New(
		llmclient.WithUpstream(llmclient.Upstream{Name: "anthropic", Provider: provider}),
		llmclient.WithObserver(printAttempts),
	)
	if err != nil {
		panic(err)
	}

	ant := anthropic.NewClient(
		antoption.WithBaseURL(srv.URL),
		antoption.WithAPIKey("sk-ant-example"),
		antoption.WithHTTPClient(&http.Client{Transport: client.Transport(nil)}),
		antoption.WithMaxRetries(0),
	)
	stream := ant.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 256,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello."))},
	})
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			panic(err)
		}
	}
	if err := stream.Err(); err != nil {
		panic(err)
	}
	_ = stream.Close()
	fmt.Println(msg.Content[0].Text)
	// Output:
	// attempt 1: anthropic -> overloaded
	// attempt 2: anthropic -> none
	// Hello!
}

// A go-openai client: set the transport on its config's HTTP client. go-openai has no
// retries of its own.
func Example_goOpenAI() {
	srv := fakeOpenAI()
	defer srv.Close()

	provider, err := oaiprovider.New(oaiprovider.WithBaseURL(srv.URL + "/v1"))
	if err != nil {
		panic(err)
	}
	client, err := llmclient.New(
		llmclient.WithUpstream(llmclient.Upstream{Name: "openai", Provider: provider}),
		llmclient.WithObserver(printAttempts),
	)
	if err != nil {
		panic(err)
	}

	cfg := goopenai.DefaultConfig("sk-example")
	cfg.BaseURL = srv.URL + "/v1"
	cfg.HTTPClient = &http.Client{Transport: client.Transport(nil)}
	resp, err := goopenai.NewClientWithConfig(cfg).CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{
		Model:    "gpt-4o-mini",
		Messages: []goopenai.ChatCompletionMessage{{Role: goopenai.ChatMessageRoleUser, Content: "Say hello."}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.Choices[0].Message.Content)
	// Output:
	// attempt 1: openai -> rate_limited
	// attempt 2: openai -> none
	// Hello!
}
