package cache_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
)

// clientEvents records a Client observer's events.
type clientEvents struct {
	mu  sync.Mutex
	all []llmclient.Event
}

func (e *clientEvents) observe(_ context.Context, ev llmclient.Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

func (e *clientEvents) cacheKinds() []event.Kind {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []event.Kind
	for _, ev := range e.all {
		if ev.Kind >= event.CacheHit {
			out = append(out, ev.Kind)
		}
	}
	return out
}

func (e *clientEvents) of(k event.Kind) []llmclient.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []llmclient.Event
	for _, ev := range e.all {
		if ev.Kind == k {
			out = append(out, ev)
		}
	}
	return out
}

func TestClientEmbedderServesTheSemanticCache(t *testing.T) {
	emb := fake.New(fake.Embedding(16).Forever())
	embedClient, err := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{Name: "emb", Provider: emb}))
	require.NoError(t, err)
	sem, err := cache.NewSemantic(cache.ClientEmbedder(embedClient,
		llmclient.EmbedRequest{Model: "text-embedding-3-small", TaskType: "SEMANTIC_SIMILARITY", Input: []string{"ignored"}}))
	require.NoError(t, err)
	var log clientEvents
	up := fake.New(fake.Reply("Nine to five.").Forever())
	c := client(t, up, sem.Middleware(), llmclient.WithObserver(log.observe))

	first, err := c.Complete(context.Background(), chat("What are your opening hours?"))
	require.NoError(t, err)
	assert.False(t, first.Cached)
	second, err := c.Complete(context.Background(), chat("What are your opening hours?"))
	require.NoError(t, err)
	assert.True(t, second.Cached, "the second is served from the semantic cache")
	assert.Equal(t, "Nine to five.", second.Text)
	assert.Len(t, up.Requests(), 1)

	recs := emb.Requests()
	require.Len(t, recs, 2, "one embedding call per question, through the embedding Client")
	for _, r := range recs {
		assert.Equal(t, []string{"What are your opening hours?"}, r.Embed.Input)
		assert.Equal(t, "SEMANTIC_SIMILARITY", r.Embed.TaskType)
		assert.Equal(t, "text-embedding-3-small", r.Model)
	}
	assert.Equal(t, uint64(1), sem.Stats().Hits)
}

func TestClientEmbedderErrors(t *testing.T) {
	emb := fake.New(fake.Fail(400).Message("bad input"), fake.Embedding(4).Vectors([]float32{1, 0}, []float32{0, 1}))
	embedClient, err := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{Name: "emb", Provider: emb}))
	require.NoError(t, err)
	e := cache.ClientEmbedder(embedClient, llmclient.EmbedRequest{Model: "m"})
	_, err = e.Embed(context.Background(), []string{"q"})
	assert.Equal(t, failure.BadRequest, llmclient.ClassOf(err))
	_, err = e.Embed(context.Background(), []string{"q"})
	require.Error(t, err, "two vectors for one text")
}

func TestClientEventsReportLookups(t *testing.T) {
	var log clientEvents
	c, _ := newCache(t, cache.WithObserver(cache.ClientEvents(log.observe)))
	up := fake.New(fake.Reply("hi").Forever())
	cl := client(t, up, c.Middleware(), llmclient.WithObserver(log.observe))
	first, err := cl.Complete(context.Background(), chat("hello"))
	require.NoError(t, err)
	assert.False(t, first.Cached)
	hit, err := cl.Complete(context.Background(), chat("hello"))
	require.NoError(t, err)
	assert.True(t, hit.Cached)
	assert.Empty(t, hit.Attempts)
	assert.Equal(t, []event.Kind{event.CacheMiss, event.CacheStored, event.CacheHit},
		log.cacheKinds())
	hits := log.of(event.CacheHit)
	require.Len(t, hits, 1)
	assert.Equal(t, "m", hits[0].Model)
	assert.False(t, hits[0].Semantic)
	assert.Zero(t, hits[0].CallID, "no call was made")
	assert.Len(t, log.of(event.Call), 1, "the hit made no call")
	assert.Equal(t, "cache_hit", event.CacheHit.String())

	s, err := cl.Stream(context.Background(), chat("hello"))
	require.NoError(t, err)
	_, err = readAll(t, s)
	require.NoError(t, err)
	assert.True(t, s.Response().Cached, "a replayed stream's response is marked too")
	assert.Nil(t, cache.ClientEvents(nil))
}

func TestClientEventsReportGuardRejections(t *testing.T) {
	var log clientEvents
	same := cache.EmbedderFunc(func(_ context.Context, texts []string) ([][]float32, error) {
		out := make([][]float32, len(texts))
		for i := range out {
			out[i] = []float32{1, 0, 0}
		}
		return out, nil
	})
	sem, err := cache.NewSemantic(same, cache.WithGuards(cache.RequireSameTerms("refund", "return")),
		cache.WithObserver(cache.ClientEvents(log.observe)))
	require.NoError(t, err)
	cl := client(t, fake.New(fake.Reply("ok").Forever()), sem.Middleware())
	for _, q := range []string{"how do I get a refund", "how do I return an item"} {
		_, err := cl.Complete(context.Background(), chat(q))
		require.NoError(t, err)
	}
	rej := log.of(event.CacheGuardRejected)
	require.Len(t, rej, 1)
	assert.True(t, rej[0].Semantic)
	assert.InDelta(t, 1.0, rej[0].Similarity, 1e-9)
	assert.Equal(t, uint64(1), sem.Health().GuardRejections)
}

func TestHealthInTheClientSnapshot(t *testing.T) {
	store, err := cache.NewMemory(cache.MemoryConfig{MaxEntries: 1})
	require.NoError(t, err)
	c, err := cache.New(store)
	require.NoError(t, err)
	sem, err := cache.NewSemantic(cache.EmbedderFunc(func(_ context.Context, texts []string) ([][]float32, error) {
		out := make([][]float32, len(texts))
		for i, t := range texts {
			out[i] = []float32{float32(len(t)), 1} // different lengths: not similar enough
		}
		return out, nil
	}), cache.WithMaxEntries(1), cache.WithThreshold(0.99999))
	require.NoError(t, err)
	cl, err := llmclient.New(
		llmclient.WithMiddleware(c.Middleware()), llmclient.WithMiddleware(sem.Middleware()),
		llmclient.WithCacheStats("responses", c.Health), llmclient.WithCacheStats("semantic", sem.Health),
		llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Reply("ok").Forever())}))
	require.NoError(t, err)
	for _, q := range []string{"a", "bbbbbbbbbbbbbbbbbbbb", "a"} {
		_, err := cl.Complete(context.Background(), chat(q))
		require.NoError(t, err)
	}
	snap := cl.Snapshot()
	require.Len(t, snap.Caches, 2)
	exact, semantic := snap.Caches[0], snap.Caches[1]
	assert.Equal(t, "responses", exact.Name)
	assert.False(t, exact.Semantic)
	assert.Equal(t, uint64(3), exact.Misses, "the second \"a\" found its entry evicted")
	assert.Equal(t, uint64(2), exact.Evictions, "MaxEntries 1: each of the three stores evicts the one before")
	assert.Equal(t, int64(1), exact.Entries)
	assert.Positive(t, exact.Bytes)
	assert.Equal(t, "semantic", semantic.Name)
	assert.True(t, semantic.Semantic)
	assert.Equal(t, uint64(2), semantic.Evictions)
	assert.Equal(t, int64(1), semantic.Entries)
	assert.Positive(t, semantic.Bytes)
	assert.Equal(t, uint64(3), semantic.Misses)
	assert.Zero(t, semantic.HitRate)

	data, err := json.Marshal(snap)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"caches":[{"name":"responses","semantic":false,"hits":0,"misses":3`)

	_, err = llmclient.New(llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New()}),
		llmclient.WithCacheStats("", c.Health), llmclient.WithCacheStats("x", nil),
		llmclient.WithCacheStats("y", c.Health), llmclient.WithCacheStats("y", sem.Health))
	require.Error(t, err)
	for _, want := range []string{"empty name", `"x": nil stats function`, `"y" registered twice`} {
		assert.Contains(t, err.Error(), want)
	}
	assert.Nil(t, newClientNoCaches(t).Snapshot().Caches)
}

func newClientNoCaches(t *testing.T) *llmclient.Client {
	c, err := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New()}))
	require.NoError(t, err)
	return c
}
