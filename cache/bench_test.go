package cache_test

import (
	"context"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/finish"
)

// noop answers at once with a fresh response, as bench/complete_bench_test.go's noop
// does: the benchmark measures the cache and the layers, not an adapter.
type noop struct{}

func (noop) Complete(context.Context, *llmclient.Call) (*llmclient.Response, error) {
	return &llmclient.Response{Text: "ok", FinishReason: finish.Stop}, nil
}

func (noop) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, llmclient.ErrUnsupported
}

// benchClient builds a Client with every layer active (a key pool, RPM/TPM/concurrency
// limits far above what the benchmark offers, the breaker, retry with its budget), as
// bench/complete_bench_test.go does, with mw outside them.
func benchClient(b *testing.B, mw ...llmclient.Middleware) *llmclient.Client {
	opts := []llmclient.Option{llmclient.WithUpstream(llmclient.Upstream{
		Name: "a", Provider: noop{}, Keys: []string{"k1", "k2"},
		Limits: llmclient.Limits{RPM: 1 << 40, TPM: 1 << 50, MaxConcurrent: 1 << 20},
	})}
	for _, m := range mw {
		opts = append(opts, llmclient.WithMiddleware(m))
	}
	c, err := llmclient.New(opts...)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// alternate asks "Say hello." and "Say goodbye." in turns, b.N times in all.
func alternate(b *testing.B, cl *llmclient.Client) {
	ctx := context.Background()
	reqs := []*llmclient.Request{chat("Say hello."), chat("Say goodbye.")}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := cl.Complete(ctx, reqs[i&1]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// repeat asks req once, then b.N times more.
func repeat(b *testing.B, cl *llmclient.Client, req *llmclient.Request) {
	ctx := context.Background()
	if _, err := cl.Complete(ctx, req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cl.Complete(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCacheComplete(b *testing.B) {
	ctx := context.Background()
	hello := chat("Say hello.")
	b.Run("no-cache", func(b *testing.B) {
		cl := benchClient(b)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := cl.Complete(ctx, hello); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("miss", func(b *testing.B) {
		// Two requests take turns in a store of one entry: every lookup misses, every
		// answer goes through every layer and is stored.
		m, _ := cache.NewMemory(cache.MemoryConfig{MaxEntries: 1})
		c, _ := cache.New(m)
		cl := benchClient(b, c.Middleware())
		alternate(b, cl)
		if st := c.Stats(); st.Hits != 0 {
			b.Fatalf("%d hits", st.Hits)
		}
	})
	b.Run("hit", func(b *testing.B) {
		m, _ := cache.NewMemory(cache.MemoryConfig{})
		c, _ := cache.New(m)
		cl := benchClient(b, c.Middleware())
		repeat(b, cl, hello)
		if st := c.Stats(); st.Misses != 1 {
			b.Fatalf("%d misses", st.Misses)
		}
	})
	b.Run("hit-parallel", func(b *testing.B) {
		m, _ := cache.NewMemory(cache.MemoryConfig{})
		c, _ := cache.New(m)
		cl := benchClient(b, c.Middleware())
		if _, err := cl.Complete(ctx, hello); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := cl.Complete(ctx, hello); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("dedup-miss", func(b *testing.B) {
		// De-duplication on: a lone call still pays for its flight (a goroutine, a
		// detached context).
		m, _ := cache.NewMemory(cache.MemoryConfig{MaxEntries: 1})
		c, _ := cache.New(m, cache.WithDedup(true))
		cl := benchClient(b, c.Middleware())
		alternate(b, cl)
	})
}

func BenchmarkKey(b *testing.B) {
	req := fullRequest()
	b.ReportAllocs()
	for b.Loop() {
		_ = cache.Key("", "tenant", req)
	}
}

// fixedEmbedder embeds each known question as its own vector of benchDims dimensions, as
// an embedding model of that size would: the benchmark measures the semantic cache, not
// an embedding call.
type fixedEmbedder map[string][]float32

const benchDims = 1536

func (e fixedEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	return [][]float32{e[texts[0]]}, nil
}

// benchVectors returns n vectors of benchDims dimensions, far apart from one another.
func benchVectors(n int) [][]float32 {
	out := make([][]float32, n)
	for i := range out {
		v := make([]float32, benchDims)
		for j := range v {
			v[j] = float32((j*(i+3))%17) - 8
		}
		v[i] += 1000
		out[i] = v
	}
	return out
}

func BenchmarkSemanticComplete(b *testing.B) {
	vecs := benchVectors(2)
	emb := fixedEmbedder{"Say hello.": vecs[0], "Say goodbye.": vecs[1]}
	b.Run("miss", func(b *testing.B) {
		// Two questions far apart take turns in an index of one entry: every lookup
		// compares with the other question and misses, every answer is indexed.
		sem, _ := cache.NewSemantic(emb, cache.WithMaxEntries(1))
		cl := benchClient(b, sem.Middleware())
		alternate(b, cl)
		if st := sem.Stats(); st.Hits != 0 {
			b.Fatalf("%d hits", st.Hits)
		}
	})
	b.Run("hit", func(b *testing.B) {
		sem, _ := cache.NewSemantic(emb)
		cl := benchClient(b, sem.Middleware())
		hello := chat("Say hello.")
		repeat(b, cl, hello)
		if st := sem.Stats(); st.Misses != 1 {
			b.Fatalf("%d misses", st.Misses)
		}
	})
}
