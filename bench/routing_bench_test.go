package bench

import (
	"context"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/routing"
)

// newGroupClient builds a Client whose model "m" is a group of three upstreams, each with
// every layer active as in newLLMClient, routed by s.
func newGroupClient(b *testing.B, opts ...llmclient.Option) *llmclient.Client {
	for _, name := range []string{"a", "b", "c"} {
		opts = append(opts, llmclient.WithUpstream(llmclient.Upstream{
			Name: name, Provider: noop{}, Keys: []string{"k1", "k2"},
			Limits: llmclient.Limits{RPM: 1 << 40, TPM: 1 << 50, MaxConcurrent: 1 << 20},
		}))
	}
	c, err := llmclient.New(append(opts, llmclient.WithModelGroup("m", "a", "b", "c"))...)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkRouting is Complete through a group of three upstreams under each routing
// strategy, and with hedging on (a delay never reached: the cost of arming a hedge).
func BenchmarkRouting(b *testing.B) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts []llmclient.Option
	}{
		{"ordered", nil},
		{"weighted", []llmclient.Option{llmclient.WithRouting("m", routing.Weighted)}},
		{"least-in-flight", []llmclient.Option{llmclient.WithRouting("m", routing.LeastInFlight)}},
		{"latency", []llmclient.Option{llmclient.WithRouting("m", routing.Latency)}},
		{"hedged", []llmclient.Option{llmclient.WithHedging("m", routing.Hedge{On: true, Delay: time.Minute})}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := newGroupClient(b, tc.opts...)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Complete(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
