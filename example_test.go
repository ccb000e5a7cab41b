package llmclient_test

import (
	"context"
	"fmt"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
)

// Testing your own code with the fake provider: script a rate limit, an overload and a
// reply, and check what your code (and the Client under it) did.
func Example_testingWithTheFakeProvider() {
	p := fake.New(
		fake.Fail(429).RetryAfter(10*time.Millisecond).Code("rate_limit_exceeded"),
		fake.Fail(529).Type("overloaded_error"),
		fake.Reply("Bonjour !").Usage(12, 3),
	)
	client, err := llmclient.New(
		llmclient.WithUpstream(llmclient.Upstream{Name: "test", Provider: p}),
		llmclient.WithBackoff(time.Millisecond, time.Millisecond),
	)
	if err != nil {
		panic(err)
	}

	// The code under test.
	translate := func(ctx context.Context, text string) (string, error) {
		resp, err := client.Complete(ctx, &llmclient.Request{
			Model:    "gpt-4o-mini",
			Messages: []llmclient.Message{llmclient.SystemMessage("Translate to French."), llmclient.UserMessage(text)},
		})
		if err != nil {
			return "", err
		}
		return resp.Text, nil
	}

	out, err := translate(context.Background(), "Hello!")
	fmt.Println(out, err)
	fmt.Println("calls:", p.Calls())
	fmt.Println("last message sent:", p.Requests()[2].Request.Messages[1].Text())
	// Output:
	// Bonjour ! <nil>
	// calls: 3
	// last message sent: Hello!
}

// Reading the attempt trace of a call that failed over.
func ExampleClient_Complete() {
	primary := fake.New(fake.Fail(503).Forever())
	backup := fake.New(fake.Reply("hi from backup"))
	client, _ := llmclient.New(
		llmclient.WithUpstream(llmclient.Upstream{Name: "primary", Provider: primary}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "backup", Provider: backup}),
		llmclient.WithMaxAttempts(1),
	)
	resp, err := client.Complete(context.Background(), &llmclient.Request{
		Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("hi")},
	})
	if err != nil {
		panic(err)
	}
	for _, a := range resp.Attempts {
		fmt.Printf("attempt %d: %s %s status=%d\n", a.Number, a.Upstream, a.Class, a.Status)
	}
	fmt.Println(resp.Text, "| fallback:", resp.Fallback)
	// Output:
	// attempt 1: primary overloaded status=503
	// attempt 2: backup none status=200
	// hi from backup | fallback: true
}
