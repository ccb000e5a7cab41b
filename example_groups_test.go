package llmclient_test

import (
	"context"
	"fmt"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
)

// A model group is the failover chain for one model name: here "chat" is gpt-4o-mini on
// OpenAI first, then deepseek-chat. The first key's quota is exhausted, so the call moves
// on, and the response says who answered with which model.
func ExampleWithModelGroup() {
	openai := fake.New(fake.Fail(429).Code("insufficient_quota").Class(failure.QuotaExhausted).Forever())
	deepseek := fake.New(fake.Reply("Hello!").Forever())
	client, err := llmclient.New(
		llmclient.WithUpstream(llmclient.Upstream{Name: "openai", Provider: openai,
			Models: map[string]string{"chat": "gpt-4o-mini"}}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "deepseek", Provider: deepseek,
			Models: map[string]string{"chat": "deepseek-chat"}}),
		llmclient.WithModelGroup("chat", "openai", "deepseek"),
	)
	if err != nil {
		panic(err)
	}
	resp, err := client.Complete(context.Background(), &llmclient.Request{
		Model: "chat", Messages: []llmclient.Message{llmclient.UserMessage("Hi")},
	})
	if err != nil {
		panic(err)
	}
	for _, a := range resp.Attempts {
		fmt.Println(a.Upstream, a.Class)
	}
	fmt.Println(resp.Text, resp.Upstream, deepseek.Requests()[0].Model, resp.Fallback)
	// Output:
	// openai quota_exhausted
	// deepseek none
	// Hello! deepseek deepseek-chat true
}
