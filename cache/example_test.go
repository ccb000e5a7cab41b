package cache_test

import (
	"context"
	"fmt"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/provider/fake"
)

func Example() {
	store, _ := cache.NewMemory(cache.MemoryConfig{})
	c, _ := cache.New(store, cache.WithPartition(cache.PartitionByMetadata("tenant")))
	p := fake.New(fake.Reply("Paris.").Forever())
	client, _ := llmclient.New(llmclient.WithMiddleware(c.Middleware()),
		llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p}))

	ask := func(tenant string) {
		req := &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("Capital of France?")},
			Metadata: map[string]string{"tenant": tenant}}
		resp, _ := client.Complete(context.Background(), req)
		fmt.Printf("%s: %s (attempts: %d)\n", tenant, resp.Text, len(resp.Attempts))
	}
	ask("acme")
	ask("acme")   // a hit: no attempt
	ask("globex") // another partition: its own call
	st := c.Stats()
	fmt.Printf("upstream calls: %d, hits: %d, misses: %d\n", p.Calls(), st.Hits, st.Misses)
	// Output:
	// acme: Paris. (attempts: 1)
	// acme: Paris. (attempts: 0)
	// globex: Paris. (attempts: 1)
	// upstream calls: 2, hits: 1, misses: 2
}

func ExampleWithIdempotencyKey() {
	store, _ := cache.NewMemory(cache.MemoryConfig{})
	c, _ := cache.New(store, cache.WithTTL(0)) // idempotency only
	p := fake.New(fake.Reply("charged once"), fake.Reply("charged twice"))
	client, _ := llmclient.New(llmclient.WithMiddleware(c.Middleware()),
		llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p}))
	req := &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("Summarize ticket 42")}}

	ctx := cache.WithIdempotencyKey(context.Background(), "ticket-42-summary")
	first, _ := client.Complete(ctx, req)
	retry, _ := client.Complete(ctx, req) // the same key: the first answer
	fmt.Println(first.Text, "/", retry.Text, "/ upstream calls:", p.Calls())
	// Output: charged once / charged once / upstream calls: 1
}
