package fake_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
)

// summarize is the code under test: it asks the model for a one-line summary and, when the
// provider is rate limited, says when to come back instead of failing.
func summarize(ctx context.Context, p llmclient.Provider, text string) (string, error) {
	resp, err := p.Complete(ctx, &llmclient.Call{
		Model: "small-model",
		Request: &llmclient.Request{
			Model: "small-model",
			Messages: []llmclient.Message{
				llmclient.SystemMessage("Summarize in one line."),
				llmclient.UserMessage(text),
			},
			MaxTokens: 50,
		},
	})
	var e *llmclient.Error
	if errors.As(err, &e) && e.Class == failure.RateLimited {
		return fmt.Sprintf("busy, try again in %v", e.RetryAfter), nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(resp.Text), nil
}

// A test of your own code: script what the model answers, run the code, then check what it
// returned and what it sent.
func Example() {
	p := fake.New(
		fake.Reply("  Cats sleep most of the day.  "),
		fake.Fail(429).RetryAfter(2*time.Second).Code("rate_limit_exceeded"),
		fake.Fail(401),
	)
	ctx := context.Background()
	for range 4 {
		summary, err := summarize(ctx, p, "A long article about cats...")
		fmt.Printf("%q, %v\n", summary, err)
	}
	first := p.Requests()[0]
	fmt.Println(p.Calls(), first.Model, first.Request.Messages[1].Text())
	// Output:
	// "Cats sleep most of the day.", <nil>
	// "busy, try again in 2s", <nil>
	// "", llmclient: auth: status 401: fake: status 401
	// "", llmclient: unknown: fake: script exhausted after 3 calls
	// 4 small-model A long article about cats...
}

// A Func step decides per call, here by API key: the revoked key fails, the others work.
func ExampleFunc() {
	p := fake.New(fake.Func(func(call *llmclient.Call) fake.Step {
		if call.APIKey == "sk-revoked" {
			return fake.Fail(401).Type("authentication_error")
		}
		return fake.Reply("ok")
	}).Forever())

	for _, key := range []string{"sk-good", "sk-revoked"} {
		resp, err := p.Complete(context.Background(), &llmclient.Call{Model: "m", APIKey: key})
		if err != nil {
			fmt.Println(key, llmclient.ClassOf(err))
			continue
		}
		fmt.Println(key, resp.Text)
	}
	// Output:
	// sk-good ok
	// sk-revoked auth
}

// A stream that breaks after its first chunk, as a dropped connection does; the code under
// test keeps what arrived and learns why it stopped.
func ExampleStreamStep_CutAfter() {
	p := fake.New(fake.Stream("The answer ", "is ", "42.").CutAfter(1))

	st, err := p.Stream(context.Background(), &llmclient.Call{Model: "m"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	var got strings.Builder
	for {
		c, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Printf("partial %q, unexpected EOF: %v\n", got.String(), errors.Is(err, io.ErrUnexpectedEOF))
			break
		}
		got.WriteString(c.Text)
	}
	// Output:
	// partial "The answer ", unexpected EOF: true
}

// Loop plays a sequence for as long as it is called: here a flaky upstream that fails
// every other call.
func ExampleLoop() {
	p := fake.New(fake.Loop(fake.Fail(503), fake.Reply("ok")))
	for range 5 {
		resp, err := p.Complete(context.Background(), &llmclient.Call{Model: "m"})
		if err != nil {
			fmt.Print(llmclient.ClassOf(err), " ")
			continue
		}
		fmt.Print(resp.Text, " ")
	}
	fmt.Println(p.Remaining())
	// Output: overloaded ok overloaded ok overloaded -1
}
