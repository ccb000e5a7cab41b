package rediscache_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/finish"
)

// partitions names a fresh partition for every call of the miss benchmark, across its runs.
var partitions atomic.Uint64

// noop answers at once, as bench/complete_bench_test.go's noop does.
type noop struct{}

func (noop) Complete(context.Context, *llmclient.Call) (*llmclient.Response, error) {
	return &llmclient.Response{Text: "ok", FinishReason: finish.Stop}, nil
}

func (noop) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, llmclient.ErrUnsupported
}

// BenchmarkRedisCacheComplete: a hit and a miss through the Redis store on loopback, with
// every layer active behind the cache, as in the cache package's benchmark.
func BenchmarkRedisCacheComplete(b *testing.B) {
	srv := startRedis(b)
	ctx := context.Background()
	newClient := func(b *testing.B, c *cache.Cache) *llmclient.Client {
		cl, err := llmclient.New(llmclient.WithMiddleware(c.Middleware()), llmclient.WithUpstream(llmclient.Upstream{
			Name: "a", Provider: noop{}, Keys: []string{"k1", "k2"},
			Limits: llmclient.Limits{RPM: 1 << 40, TPM: 1 << 50, MaxConcurrent: 1 << 20},
		}))
		if err != nil {
			b.Fatal(err)
		}
		return cl
	}
	b.Run("hit", func(b *testing.B) {
		st, _ := srv.store()
		c, _ := cache.New(st)
		cl := newClient(b, c)
		if _, err := cl.Complete(ctx, chat("Say hello.")); err != nil {
			b.Fatal(err)
		}
		if err := c.Flush(ctx); err != nil { // the answer is stored after it is returned
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := cl.Complete(ctx, chat("Say hello.")); err != nil {
				b.Fatal(err)
			}
		}
		if s := c.Stats(); s.Misses > 1 {
			b.Fatalf("%+v", s)
		}
	})
	b.Run("miss", func(b *testing.B) {
		// A fresh partition per call: every lookup finds nothing, every answer is stored.
		st, _ := srv.store()
		c, _ := cache.New(st, cache.WithPartition(func(context.Context, *llmclient.Request) string {
			return strconv.FormatUint(partitions.Add(1), 36)
		}))
		cl := newClient(b, c)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := cl.Complete(ctx, chat("Say hello.")); err != nil {
				b.Fatal(err)
			}
		}
		if err := c.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		if s := c.Stats(); s.Hits != 0 {
			b.Fatalf("%+v", s)
		}
	})
}
