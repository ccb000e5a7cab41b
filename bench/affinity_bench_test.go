package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/routing"
)

// longReq is a request with a 6 KiB system prompt, as the calls that prompt caching and
// its affinity are for.
var longReq = &llmclient.Request{Model: "m", Messages: []llmclient.Message{
	llmclient.SystemMessage(strings.Repeat("You answer questions about the attached contract. ", 120)),
	llmclient.UserMessage("Say hello.")}}

// BenchmarkCacheAffinity is Complete through a least-in-flight group of three upstreams of
// two keys each, with a 6 KiB prompt: without affinity (the default), with
// WithCacheAffinity(4096) (a 4 KiB prefix hashed, the upstream and key ranked), and with a
// PromptCacheKey (the key hashed instead).
func BenchmarkCacheAffinity(b *testing.B) {
	ctx := context.Background()
	keyed := *longReq
	keyed.PromptCacheKey = "tenant-42/contracts"
	for _, tc := range []struct {
		name string
		req  *llmclient.Request
		opts []llmclient.Option
	}{
		{"off", longReq, nil},
		{"prefix-4KiB", longReq, []llmclient.Option{llmclient.WithCacheAffinity(4096)}},
		{"prompt-cache-key", &keyed, []llmclient.Option{llmclient.WithCacheAffinity(4096)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := newGroupClient(b, append(tc.opts, llmclient.WithRouting("m", routing.LeastInFlight))...)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Complete(ctx, tc.req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
