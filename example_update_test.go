package llmclient_test

import (
	"context"
	"fmt"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
)

// Update changes a running Client: here it reorders a model group, so that the next call
// goes to the backup first. An invalid change is refused with everything else in the same
// Update: nothing changes.
func ExampleClient_Update() {
	client, err := llmclient.New(
		llmclient.WithUpstream(llmclient.Upstream{Name: "primary", Provider: fake.New(fake.Reply("from primary").Forever())}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "backup", Provider: fake.New(fake.Reply("from backup").Forever())}),
		llmclient.WithModelGroup("chat", "primary", "backup"),
	)
	if err != nil {
		panic(err)
	}
	ask := func() string {
		resp, err := client.Complete(context.Background(), &llmclient.Request{
			Model: "chat", Messages: []llmclient.Message{llmclient.UserMessage("Hi")},
		})
		if err != nil {
			return err.Error()
		}
		return resp.Text
	}
	fmt.Println(ask())
	if err := client.Update(llmclient.SetGroup("chat", "backup", "primary")); err != nil {
		panic(err)
	}
	fmt.Println(ask())
	err = client.Update(
		llmclient.SetGroup("chat", "primary", "backup"),
		llmclient.SetWeight("missing", 1), // no such upstream: the whole Update is refused
	)
	fmt.Println(err != nil, ask())
	// Output:
	// from primary
	// from backup
	// true from backup
}
