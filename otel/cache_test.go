package otel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/provider/fake"
)

// A cache wired with cache.ClientEvents and registered with WithCacheStats: its lookups
// are counted by result from the events, its bytes, entries, evictions and hit rate are
// read from the Client's snapshot.
func TestCacheMetrics(t *testing.T) {
	r := newRig(t)
	store, err := cache.NewMemory(cache.MemoryConfig{MaxEntries: 1})
	require.NoError(t, err)
	ch, err := cache.New(store, cache.WithObserver(cache.ClientEvents(r.tel.Observe)))
	require.NoError(t, err)
	c := r.client(t, llmclient.WithMiddleware(ch.Middleware()), llmclient.WithCacheStats("responses", ch.Health),
		llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Reply("hi").Forever())}))
	for _, q := range []string{"a", "a", "b", "a"} {
		resp, err := c.Complete(context.Background(), &llmclient.Request{Model: "m",
			Messages: []llmclient.Message{llmclient.UserMessage(q)}})
		require.NoError(t, err)
		_ = resp
	}
	ms := r.collect(t)
	lookups := wrapI(sumI(t, ms, "llmclient.cache.lookups"))
	count := func(result string) int64 {
		m := matching(lookups, map[string]any{"llmclient.cache.result": result, "llmclient.cache.layer": "exact"})
		require.Len(t, m, 1, result)
		return m[0].Value
	}
	assert.Equal(t, int64(1), count("hit"))
	assert.Equal(t, int64(3), count("miss"), `"b" evicted the first "a"`)
	stores := sumI(t, ms, "llmclient.cache.stores")
	require.Len(t, stores, 1)
	assert.Equal(t, int64(3), stores[0].Value)

	name := map[string]any{"llmclient.cache.name": "responses", "llmclient.cache.layer": "exact"}
	ev := matching(wrapI(sumI(t, ms, "llmclient.cache.evictions")), name)
	require.Len(t, ev, 1)
	assert.Equal(t, int64(2), ev[0].Value)
	ent := matching(wrapI(gaugeI(t, ms, "llmclient.cache.entries")), name)
	require.Len(t, ent, 1)
	assert.Equal(t, int64(1), ent[0].Value)
	by := matching(wrapI(gaugeI(t, ms, "llmclient.cache.bytes")), name)
	require.Len(t, by, 1)
	assert.Positive(t, by[0].Value)
	hr := matching(wrapF(gaugeF(t, ms, "llmclient.cache.hit_rate")), name)
	require.Len(t, hr, 1)
	assert.Equal(t, 0.25, hr[0].Value)
}

// Client.Embed's calls and attempts are recorded with gen_ai.operation.name embeddings.
func TestEmbedOperation(t *testing.T) {
	r := newRig(t)
	c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Embedding(4).Forever())}))
	_, err := c.Embed(context.Background(), &llmclient.EmbedRequest{Model: "emb", Input: []string{"x", "y"}})
	require.NoError(t, err)
	_, err = c.Complete(context.Background(), chatReq("m"))
	require.Error(t, err, "the fake's script answers embeddings only")
	ms := r.collect(t)
	dur := wrapHF(histF(t, ms, "gen_ai.client.operation.duration"))
	emb := matching(dur, map[string]any{"gen_ai.operation.name": "embeddings"})
	require.Len(t, emb, 1)
	assert.Equal(t, uint64(1), emb[0].Count)
	assert.Len(t, matching(dur, map[string]any{"gen_ai.operation.name": "chat"}), 1)
	att := wrapI(sumI(t, ms, "llmclient.client.attempts"))
	assert.Len(t, matching(att, map[string]any{"gen_ai.operation.name": "embeddings"}), 1)
	tok := matching(wrapHI(histI(t, ms, "gen_ai.client.token.usage")), map[string]any{"gen_ai.operation.name": "embeddings", "gen_ai.token.type": "input"})
	require.Len(t, tok, 1)
	assert.Equal(t, int64(2), tok[0].Sum)
}
