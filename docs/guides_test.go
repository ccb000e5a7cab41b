package docs_test

// The Go code the guides (README.md and docs/*.md) show, in functions that compile with the
// module: TestGuideCodeCompiles checks that every ```go block of a guide appears, line for
// line, in a Go file of the repository, such as this one. The functions are never run: they
// call real vendors. Code that needs a nested module (Redis, OpenTelemetry, a vendor SDK) is
// shown as an excerpt of that module's own examples.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/provider/gemini"
	"github.com/llmclient/llmclient/provider/openai"
	"github.com/llmclient/llmclient/routing"
	"github.com/llmclient/llmclient/slogobserver"
)

// README.md, Example.
func example(ctx context.Context) error {
	openaiAPI, err := openai.New() // api.openai.com
	if err != nil {
		return err
	}
	deepseekAPI, err := openai.New(openai.WithBaseURL("https://api.deepseek.com/v1"))
	if err != nil {
		return err
	}
	client, err := llmclient.New( // New validates every option and reports all problems at once
		llmclient.WithUpstream(llmclient.Upstream{Name: "openai", Provider: openaiAPI,
			Keys:   []string{os.Getenv("OPENAI_KEY_1"), os.Getenv("OPENAI_KEY_2")}, // a key pool
			Limits: llmclient.Limits{RPM: 500, TPM: 200_000},                       // per key
			Models: map[string]string{"chat": "gpt-4o-mini"}}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "deepseek", Provider: deepseekAPI,
			Keys: []string{os.Getenv("DEEPSEEK_KEY")}, Models: map[string]string{"chat": "deepseek-chat"}}),
		llmclient.WithModelGroup("chat", "openai", "deepseek"), // the failover chain for "chat"
		llmclient.WithObserver(slogobserver.New(slog.Default())),
	)
	if err != nil {
		return err
	}
	resp, err := client.Complete(ctx, &llmclient.Request{
		Model: "chat", Messages: []llmclient.Message{llmclient.UserMessage("Hello!")},
	})
	var e *llmclient.Error
	if errors.As(err, &e) {
		return fmt.Errorf("class=%s upstream=%s status=%d attempts=%d: %w", e.Class, e.Upstream, e.Status, len(e.Attempts), err)
	} else if err != nil {
		return err
	}
	fmt.Println(resp.Text, "— served by", resp.Upstream, "after", len(resp.Attempts), "attempt(s)")
	return nil
}

// docs/concepts.md, Routing, hedging and per-call overrides.
func routingExample(ctx context.Context, oai, az llmclient.Provider, id string) (*llmclient.Client, context.Context, error) {
	c, err := llmclient.New(
		llmclient.WithUpstream(llmclient.Upstream{Name: "openai", Provider: oai, Weight: 3}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "azure", Provider: az, Weight: 1}),
		llmclient.WithModelGroup("chat", "openai", "azure"),
		llmclient.WithRouting("chat", routing.Latency),         // or routing.Weighted, routing.LeastInFlight
		llmclient.WithHedging("chat", routing.Hedge{On: true}), // after the primary's p95 (2 s before it is known)
	)
	ctx = llmclient.WithCallOptions(ctx, llmclient.CallOptions{
		MaxAttempts: 1, AttemptTimeout: 20 * time.Second, Exclude: []string{"azure"},
		Headers: http.Header{"X-Request-Id": {id}},
	})
	return c, ctx, err
}

// docs/concepts.md, Streaming.
func streaming(ctx context.Context, client *llmclient.Client, req *llmclient.Request) error {
	stream, err := client.Stream(ctx, req) // returns once the first content token has arrived
	if err != nil {
		return err // every attempt failed before the first token
	}
	defer stream.Close()
	for stream.Next() {
		fmt.Print(stream.Current().Text)
	}
	if err := stream.Err(); err != nil {
		// failure.StreamInterrupted: the partial output is in err.(*llmclient.Error).Partial, and
		// llmclient.ContinuationRequest(req, err) builds the request that continues it.
		return err
	}
	resp := stream.Response() // the accumulated response: text, tool calls, usage, attempts
	fmt.Println(resp.Upstream)
	return nil
}

// docs/concepts.md, Failing over across vendors.
func acrossVendors(ctx context.Context, openaiKey, anthropicKey, geminiKey string, msgs []llmclient.Message) (*llmclient.Response, error) {
	oai, _ := openai.New()
	claude, _ := anthropic.New()
	gem, _ := gemini.New()

	client, _ := llmclient.New(
		llmclient.WithUpstream(llmclient.Upstream{Name: "openai", Provider: oai,
			Keys: []string{openaiKey}, Models: map[string]string{"smart": "gpt-4.1"}}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "anthropic", Provider: claude,
			Keys: []string{anthropicKey}, Models: map[string]string{"smart": "claude-sonnet-4-5"}}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "gemini", Provider: gem,
			Keys: []string{geminiKey}, Models: map[string]string{"smart": "gemini-2.5-pro"}}),
		llmclient.WithModelGroup("smart", "openai", "anthropic", "gemini"),
	)
	resp, err := client.Complete(ctx, &llmclient.Request{Model: "smart", Messages: msgs})
	// resp.Upstream and resp.Model say who answered; resp.Fallback is true when it was not openai.
	return resp, err
}

// docs/concepts.md, Testing your code: the fake provider.
func fakeProvider() {
	p := fake.New(
		fake.Fail(429).RetryAfter(2*time.Second).Code("rate_limit_exceeded"),
		fake.Fail(503),
		fake.Reply("hello").Usage(12, 3),
		fake.Stream("Hel", "lo").StallFirst(30*time.Second).KeepAlive(5*time.Second).CutAfter(1),
	)
	client, _ := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{Name: "test", Provider: p}))
	// … exercise your code …
	_ = client
	p.Calls()    // how many calls reached the provider
	p.Requests() // what each one carried
}

// docs/transport.md, the Client an SDK's transport comes from.
func transportClient() *llmclient.Client {
	provider, _ := openai.New() // the upstream the SDK talks to: api.openai.com by default
	client, err := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{
		Name: "openai", Provider: provider,
		Keys:   []string{os.Getenv("OPENAI_KEY_1"), os.Getenv("OPENAI_KEY_2")}, // optional pool
		Limits: llmclient.Limits{RPM: 500, TPM: 200_000},                       // per key, optional
	}))
	if err != nil {
		log.Fatal(err)
	}
	return client
}

// docs/operations.md, Operating it live.
func update(client *llmclient.Client) error {
	// Quota raised, a key rotated, a slow upstream given less time and less traffic, a group
	// reordered: all of it or, if any change is invalid, none of it.
	err := client.Update(
		llmclient.SetLimits("openai", llmclient.Limits{RPM: 10_000, TPM: 2_000_000}),
		llmclient.SetKeys("openai", "sk-new", "sk-current"),
		llmclient.SetTimeout("backup", 20*time.Second),
		llmclient.SetWeight("backup", 1),
		llmclient.SetGroup("chat", "openai", "backup"),
	)
	return err
}

// docs/operations.md, the incident runbook.
func runbook(client *llmclient.Client) {
	_ = client.ForceBreakerOpen("primary")    // stop calling it: its calls fail over
	_ = client.ForceBreakerClosed("primary")  // keep calling it, whatever its calls' outcomes
	_ = client.ResetBreaker("primary")        // end a forced state: closed, with an empty window
	_ = client.EvictKey("primary", "key#2")   // take one key out of the pool
	_ = client.RestoreKey("primary", "key#2") // put it back at once
	_ = client.Drain("primary", true)         // no new calls; calls in flight finish
	_ = client.Drain("primary", false)        // undrain
}

// docs/cache.md, Caching: pay once.
func caching(ctx context.Context, provider llmclient.Provider, jobID string) (*llmclient.Client, context.Context, error) {
	store, err := cache.NewMemory(cache.MemoryConfig{MaxBytes: 256 << 20}) // or rediscache.New(rdb)
	if err != nil {
		return nil, ctx, err
	}
	c, err := cache.New(store,
		cache.WithTTL(time.Hour),
		cache.WithPartition(cache.PartitionByMetadata("tenant")), // tenants never share an answer
		cache.WithDedup(true))                                    // identical calls in flight share one
	if err != nil {
		return nil, ctx, err
	}
	client, err := llmclient.New(llmclient.WithMiddleware(c.Middleware()),
		llmclient.WithUpstream(llmclient.Upstream{Name: "openai", Provider: provider}))

	ctx = cache.WithControl(ctx, cache.Control{MaxAge: 10 * time.Minute}) // or NoCache, NoStore
	ctx = cache.WithIdempotencyKey(ctx, jobID)                            // a retry after a timeout gets the first answer
	return client, ctx, err
}

// docs/cost.md, The cost of a call.
func costOfACall(ctx context.Context, oai llmclient.Provider, req *llmclient.Request) error {
	c, _ := llmclient.New(
		llmclient.WithUpstream(llmclient.Upstream{Name: "openai", Provider: oai}), // priced as "openai" from its base URL
		llmclient.WithPricing(nil), // nil: the embedded genai-prices snapshot
	)
	resp, err := c.Complete(ctx, req)
	if err != nil {
		return err
	}
	fmt.Println(resp.Cost)             // "$0.00162", "~$0.0021" when estimated, "unknown" without a price
	fmt.Println(resp.Attempts[0].Cost) // each attempt's share; failed ones included
	return nil
}

// docs/cost.md, A budget and A cost-aware group.
func budgets(paris *time.Location, mini, flagship llmclient.Provider) (*llmclient.Client, error) {
	return llmclient.New(
		llmclient.WithUpstream(llmclient.Upstream{Name: "mini", Provider: mini}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "flagship", Provider: flagship}),
		llmclient.WithPricing(nil),
		llmclient.WithBudget(budget.Budget{
			Name:   "daily",
			Window: budget.Daily(paris),            // or Hourly, Monthly (time zone), Rolling(d)
			Cap:    200 * pricing.Dollar,           // hard cap per window
			Soft:   []float64{0.8},                 // event.Budget once per window at 80%
			Scope:  budget.EachPartition("tenant"), // default: the whole Client; or Partition, Upstream, Model
		}),
		llmclient.WithModelGroup("chat", "mini", "flagship"),
		llmclient.WithCostFailover("chat", budget.Failover{
			MaxRatio: 3,    // fail over only to upstreams at most 3× the first's price for this call
			WhenOpen: true, // costlier ones only while the first upstream cannot serve (open, drained, tripped elsewhere)
		}),
	)
}

// docs/cost.md, Prices and planning.
func prices(resp *llmclient.Response) error {
	m, ok := pricing.Default().Lookup("anthropic", resp.Model) // matched as genai-prices does
	if !ok {
		return errors.New("unknown model: the cost is unknown, never $0")
	}
	cost, err := m.Cost(pricing.Tokens{Input: 12_000, CacheRead: 8000, Output: 700}, time.Now())
	fmt.Println(cost) // $0.0249 for claude-sonnet-4-5: 4,000 × $3 + 8,000 × $0.30 + 700 × $15 per MTok
	return err
}

// docs/cost.md, Prompt caching.
func promptCaching(oai llmclient.Provider, req *llmclient.Request) (*llmclient.Client, error) {
	client, err := llmclient.New(
		llmclient.WithUpstream(llmclient.Upstream{Name: "openai", Provider: oai}),
		llmclient.WithCacheAffinity(4096), // calls sharing their first 4 KiB go to one upstream and key
	)
	req.PromptCacheKey = "tenant-42/support-v3" // sent as OpenAI's prompt_cache_key; also the affinity key
	return client, err
}

// docs/observability.md, the health endpoint.
func health(client *llmclient.Client) {
	http.HandleFunc("/healthz/llm", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(client.Snapshot())
	})
}

var (
	_ = example
	_ = routingExample
	_ = streaming
	_ = acrossVendors
	_ = fakeProvider
	_ = transportClient
	_ = update
	_ = runbook
	_ = caching
	_ = costOfACall
	_ = budgets
	_ = prices
	_ = promptCaching
	_ = health
)
