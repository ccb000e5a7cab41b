// Command quickstart shows what llmclient does when upstreams misbehave. With no API key
// it needs no network: it starts simulated OpenAI-compatible upstreams on loopback that
// answer with the vendor's real wire format, and prints a timeline of what each layer did.
// With OPENAI_API_KEY set it sends one real request to OpenAI instead.
//
//	go run ./examples/quickstart
//
// Every scenario prints the settings it changes from the defaults (README.md lists them
// all); everything it does not name runs at its default. The first scenario and the real
// request change nothing.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/provider/openai"
)

func main() {
	if key := os.Getenv("OPENAI_API_KEY"); key != "" {
		realRequest(key)
		return
	}
	start := time.Now()
	tl := &timeline{start: start}

	fmt.Println("1. One call meets a 429 with Retry-After, then a 503, then succeeds.")
	fmt.Println("   settings: all defaults (every scenario adds only the observer that prints this timeline)")
	sim := newSimUpstream(
		reply429(1), // "Retry-After: 1", OpenAI's rate_limit_exceeded body and x-ratelimit-* headers
		reply503(),  // server_is_overloaded
		replyOK("Hello from the primary upstream."),
	)
	defer sim.Close()
	client := mustClient(tl, llmclient.WithUpstream(llmclient.Upstream{
		Name: "primary", Provider: mustOpenAI(sim.URL), Keys: []string{"sk-demo-primary"},
	}))
	resp, err := client.Complete(context.Background(), question())
	report(tl, resp, err)

	fmt.Println("\n2. The primary is down: its breaker opens and traffic fails over without calling it.")
	fmt.Println("   changed from the defaults: WithMaxAttempts(1) (default 3 per upstream);")
	fmt.Println("   breaker opens after 3 failures in a row (default 10) for 1m (default 15s)")
	down := newSimUpstream(reply500())
	defer down.Close()
	backup := newSimUpstream(replyOK("Hello from the backup upstream."))
	defer backup.Close()
	client = mustClient(tl,
		llmclient.WithUpstream(llmclient.Upstream{Name: "primary", Provider: mustOpenAI(down.URL)}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "backup", Provider: mustOpenAI(backup.URL)}),
		llmclient.WithMaxAttempts(1), // fail over at once, to keep the demo short
		llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 3, OpenTimeout: time.Minute}),
	)
	for i := 1; i <= 5; i++ {
		resp, err := client.Complete(context.Background(), question())
		report(tl, resp, err)
	}
	fmt.Printf("   the primary saw %d requests out of 5: the rest never left the process.\n", down.Calls())

	fmt.Println("\n3. A stream stalls before its first token (keep-alives only): the caller never notices.")
	fmt.Println("   changed from the defaults: WithMaxAttempts(1) (default 3 per upstream);")
	fmt.Println("   WithFirstTokenTimeout(2s) (default: learned per upstream and model, 1m until then)")
	stalled := newSimUpstream(stallStream(time.Minute))
	defer stalled.Close()
	healthy := newSimUpstream(streamOK("Streaming ", "from ", "the ", "backup."))
	defer healthy.Close()
	client = mustClient(tl,
		llmclient.WithUpstream(llmclient.Upstream{Name: "primary", Provider: mustOpenAI(stalled.URL)}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "backup", Provider: mustOpenAI(healthy.URL)}),
		llmclient.WithMaxAttempts(1),
		llmclient.WithFirstTokenTimeout(2*time.Second),
	)
	stream, err := client.Stream(context.Background(), question())
	if err != nil {
		log.Fatalf("stream: %v", err)
	}
	fmt.Printf("%s   the caller's stream begins\n", tl.stamp())
	for stream.Next() {
		switch ch := stream.Current(); {
		case ch.Text != "":
			fmt.Printf("%s   chunk %q\n", tl.stamp(), ch.Text)
		case ch.Usage != nil:
			fmt.Printf("%s   usage: %d in, %d out\n", tl.stamp(), ch.Usage.InputTokens, ch.Usage.OutputTokens)
		case ch.FinishReason != "":
			fmt.Printf("%s   finish: %s\n", tl.stamp(), ch.FinishReason)
		}
	}
	if err := stream.Err(); err != nil {
		log.Fatalf("stream: %v", err)
	}
	stream.Close()
	report(tl, stream.Response(), nil)
}

func question() *llmclient.Request {
	return &llmclient.Request{
		Model:     "gpt-4o-mini",
		Messages:  []llmclient.Message{llmclient.UserMessage("Say hello in one short sentence.")},
		MaxTokens: 64,
	}
}

func mustOpenAI(baseURL string, opts ...openai.Option) *openai.Provider {
	p, err := openai.New(append([]openai.Option{openai.WithBaseURL(baseURL)}, opts...)...)
	if err != nil {
		log.Fatal(err)
	}
	return p
}

func mustClient(tl *timeline, opts ...llmclient.Option) *llmclient.Client {
	c, err := llmclient.New(append(opts, llmclient.WithObserver(tl.observe))...)
	if err != nil {
		log.Fatal(err)
	}
	return c
}

// report prints the outcome of one call: who served it, after how many attempts.
func report(tl *timeline, resp *llmclient.Response, err error) {
	if err != nil {
		fmt.Printf("%s   => error: %v\n", tl.stamp(), err)
		return
	}
	fmt.Printf("%s   => %q from %s after %d attempt(s)%s\n", tl.stamp(), resp.Text, resp.Upstream,
		len(resp.Attempts), map[bool]string{true: ", fell back", false: ""}[resp.Fallback])
}

// realRequest sends one request to OpenAI with the key from the environment.
func realRequest(key string) {
	tl := &timeline{start: time.Now()}
	client := mustClient(tl, llmclient.WithUpstream(llmclient.Upstream{
		Name: "openai", Provider: mustOpenAI(openai.DefaultBaseURL), Keys: []string{key},
	}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := client.Complete(ctx, question())
	report(tl, resp, err)
	if err != nil {
		os.Exit(1)
	}
}
