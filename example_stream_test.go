package llmclient_test

import (
	"context"
	"fmt"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
)

// A stream whose first upstream fails before the first token: the Client fails over and
// the caller reads one clean stream from the backup.
func ExampleClient_Stream() {
	primary := fake.New(fake.Fail(503).Forever())
	backup := fake.New(fake.Stream("Hel", "lo", "!").Usage(5, 3))
	client, err := llmclient.New(
		llmclient.WithUpstream(llmclient.Upstream{Name: "primary", Provider: primary}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "backup", Provider: backup}),
		llmclient.WithMaxAttempts(1), // fail over at once instead of retrying the primary
	)
	if err != nil {
		panic(err)
	}
	stream, err := client.Stream(context.Background(), &llmclient.Request{
		Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("Say hello.")},
	})
	if err != nil {
		panic(err) // every attempt failed before the first token
	}
	defer stream.Close()
	var chunks []string
	for stream.Next() {
		if text := stream.Current().Text; text != "" {
			chunks = append(chunks, text)
		}
	}
	fmt.Printf("%q\n", chunks)
	if err := stream.Err(); err != nil {
		panic(err) // after the first token: an interruption, with the partial output
	}
	resp := stream.Response()
	fmt.Println(resp.Text, "from", resp.Upstream, "after", len(resp.Attempts), "attempts")
	// Output:
	// ["Hel" "lo" "!"]
	// Hello! from backup after 2 attempts
}
