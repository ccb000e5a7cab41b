package llmclient_test

import (
	"context"
	"fmt"

	"github.com/llmclient/llmclient/estimate"
	"github.com/llmclient/llmclient/ratelimit"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
)

// Limits go on each upstream (per API key); partitions limit callers before an upstream is
// chosen. Batch requests use at most 80% of each bucket by default.
func ExampleLimits() {
	c, err := llmclient.New(
		llmclient.WithUpstream(llmclient.Upstream{
			Name:     "openai",
			Provider: fake.New(),
			Limits:   llmclient.Limits{RPM: 500, TPM: 200_000, MaxConcurrent: 20},
		}),
		llmclient.WithPartitionLimits("tenant", llmclient.Limits{RPM: 60, TPM: 50_000}),
		llmclient.WithMaxWait(10_000_000_000), // 10 s
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := llmclient.WithPartition(context.Background(), "acme")
	req := &llmclient.Request{Model: "gpt-4o", Priority: ratelimit.Batch,
		Messages: []llmclient.Message{llmclient.UserMessage("Summarize the attached report.")}}
	_, _ = c.Complete(ctx, req)
	fmt.Println("partition:", llmclient.PartitionFromContext(ctx))
	// Output: partition: acme
}

// EstimatePromptTokens is what the limiter charges for a prompt, before the reserved output.
// The exact count with o200k_base is 24: 13 tokens of text, 4 of framing per message and 3
// to prime the reply; the heuristic, which may err up to 10% high, matches it here.
func ExampleEstimatePromptTokens() {
	req := &llmclient.Request{Model: "gpt-4o", Messages: []llmclient.Message{
		llmclient.SystemMessage("You are a helpful assistant."),
		llmclient.UserMessage("What is the capital of Australia?"),
	}}
	fmt.Println(llmclient.EstimatePromptTokens(estimate.Heuristic{}, req))
	// Output: 24
}
