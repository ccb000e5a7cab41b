package cache_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// axisEmbedder embeds question "q<i>" as the i-th axis of dims dimensions: every question
// is far from every other, so each is its own entry.
func axisEmbedder(dims int) cache.Embedder {
	return cache.EmbedderFunc(func(_ context.Context, texts []string) ([][]float32, error) {
		var i int
		if _, err := fmt.Sscanf(texts[0], "q%d", &i); err != nil {
			return nil, err
		}
		v := make([]float32, dims)
		v[i%dims] = 1
		return [][]float32{v}, nil
	})
}

// Big answers fill the index past its byte bound: it never holds more than the bound,
// and the least recently used questions go first, as past the count.
func TestSemanticByteBoundEvictsLeastRecentlyUsed(t *testing.T) {
	const bound, answer = 400 << 10, 100_000
	sem := newSemantic(t, axisEmbedder(64), cache.WithMaxSemanticBytes(bound))
	p := fake.New(fake.Reply(strings.Repeat("x", answer)).Forever())
	cl := client(t, p, sem.Middleware())
	check := func(after string) cache.SemanticStats {
		t.Helper()
		st := sem.Stats()
		require.LessOrEqual(t, st.Bytes, int64(bound), "after %s", after)
		require.Greater(t, st.Bytes, int64(st.Entries*answer), "the answers are counted")
		return st
	}
	ask(t, cl, "q0")
	ask(t, cl, "q1")
	ask(t, cl, "q0") // a hit: q0 is now more recently used than q1
	require.Equal(t, 2, p.Calls())
	asked := 2
	for sem.Stats().Evictions == 0 {
		require.Less(t, asked, 10, "the byte bound never evicted")
		ask(t, cl, fmt.Sprintf("q%d", asked))
		asked++
		check(fmt.Sprintf("q%d", asked-1))
	}
	st := check("the first eviction")
	kept := st.Entries
	require.Equal(t, asked-1, kept, "one question dropped")
	require.Less(t, kept, cache.DefaultMaxSemanticEntries)

	calls := p.Calls()
	ask(t, cl, "q0")
	assert.Equal(t, calls, p.Calls(), "q0, used after q1, is kept")
	ask(t, cl, "q1")
	assert.Equal(t, calls+1, p.Calls(), "q1, the least recently used, went first")
	check("q1 again")
	assert.Equal(t, kept, sem.Stats().Entries)
	assert.Equal(t, uint64(2), sem.Stats().Evictions)
	ask(t, cl, "q2")
	assert.Equal(t, calls+2, p.Calls(), "then q2, the oldest left")
}

// The vector and the question count in the bytes: a question whose embedding alone is
// larger than the bound is not indexed, its call answered all the same.
func TestSemanticByteBoundCountsTheVectorAndTheQuestion(t *testing.T) {
	const dims = cache.MaxEmbeddingDimensions
	sem := newSemantic(t, axisEmbedder(dims))
	p := fake.New(fake.Reply("x").Forever())
	cl := client(t, p, sem.Middleware())
	ask(t, cl, "q1")
	assert.GreaterOrEqual(t, sem.Stats().Bytes, int64(4*dims), "the vector is counted")

	for name, tc := range map[string]struct {
		emb      cache.Embedder
		question string
	}{
		"vector":   {axisEmbedder(dims), "q1"},
		"question": {axisEmbedder(8), "q1 " + strings.Repeat("y", 4*dims)},
	} {
		t.Run(name, func(t *testing.T) {
			var ev events
			sem := newSemantic(t, tc.emb, cache.WithMaxSemanticBytes(4*dims), cache.WithObserver(ev.observe))
			p := fake.New(fake.Reply("x").Forever())
			cl := client(t, p, sem.Middleware())
			assert.Equal(t, "x", ask(t, cl, tc.question))
			assert.Equal(t, "x", ask(t, cl, tc.question))
			assert.Equal(t, 2, p.Calls(), "not indexed")
			st := sem.Stats()
			assert.Zero(t, st.Entries)
			assert.Zero(t, st.Bytes)
			assert.Equal(t, uint64(2), st.NotStored)
			ns := ev.of(cache.EventNotStored)
			require.Len(t, ns, 2)
			assert.ErrorIs(t, ns[0].Err, cache.ErrTooLarge)
			assert.ErrorContains(t, ns[0].Err, "WithMaxSemanticBytes")
		})
	}
}

// 0 is the default (64 MiB), a negative bound is an error, a huge one is no bound but the
// count.
func TestSemanticByteBoundOption(t *testing.T) {
	for _, n := range []int64{-1, math.MinInt64} {
		_, err := cache.NewSemantic(&conceptEmbedder{}, cache.WithMaxSemanticBytes(n))
		assert.ErrorContains(t, err, "max semantic bytes must not be negative", "%d", n)
	}

	// Answers of 1,000,000 bytes (the default entry bound is 1 MiB): 80 of them pass the
	// default bound, 67 fit in it.
	const answer, asked = 1_000_000, 80
	for name, n := range map[string]int64{"zero is the default": 0, "default": cache.DefaultMaxSemanticBytes} {
		t.Run(name, func(t *testing.T) {
			sem := newSemantic(t, axisEmbedder(128), cache.WithMaxSemanticBytes(n))
			p := fake.New(fake.Reply(strings.Repeat("x", answer)).Forever())
			cl := client(t, p, sem.Middleware())
			for i := range asked {
				ask(t, cl, fmt.Sprintf("q%d", i))
			}
			st := sem.Stats()
			assert.LessOrEqual(t, st.Bytes, int64(cache.DefaultMaxSemanticBytes))
			assert.Greater(t, st.Bytes, int64(cache.DefaultMaxSemanticBytes-2*answer), "full up to one answer")
			// Each item holds the answer and a little more (its question, vector, entry).
			assert.LessOrEqual(t, st.Entries, cache.DefaultMaxSemanticBytes/answer)
			assert.Greater(t, st.Entries, cache.DefaultMaxSemanticBytes/(answer+4096))
			assert.Equal(t, uint64(asked-st.Entries), st.Evictions)
		})
	}

	for _, n := range []int64{1 << 40, math.MaxInt64 - 1, math.MaxInt64} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			sem := newSemantic(t, axisEmbedder(128), cache.WithMaxSemanticBytes(n), cache.WithMaxEntries(3))
			p := fake.New(fake.Reply(strings.Repeat("x", answer)).Forever())
			cl := client(t, p, sem.Middleware())
			for i := range 5 {
				ask(t, cl, fmt.Sprintf("q%d", i))
			}
			st := sem.Stats()
			assert.Equal(t, 3, st.Entries, "the count bounds it")
			assert.Equal(t, uint64(2), st.Evictions)
			assert.Greater(t, st.Bytes, int64(3*answer))
			ask(t, cl, "q4")
			assert.Equal(t, 5, p.Calls(), "and it answers")
		})
	}
}

// A hostile or broken embedder never gets a vector into the index: the call is a miss
// answered by the model, counted and reported as an embedder failure.
func TestSemanticRefusesHostileEmbeddings(t *testing.T) {
	huge := make([]float32, 10_000_000)
	huge[0] = 1
	over := make([]float32, cache.MaxEmbeddingDimensions+1)
	over[1] = 1
	for name, v := range map[string][]float32{
		"10 million dimensions":     huge,
		"one past the cap":          over,
		"empty":                     {},
		"nil":                       nil,
		"NaN element":               {1, float32(math.NaN()), 1},
		"+Inf element":              {1, float32(math.Inf(1))},
		"-Inf element":              {float32(math.Inf(-1)), 0},
		"Inf and -Inf":              {float32(math.Inf(1)), float32(math.Inf(-1))},
		"zero":                      {0, 0, 0},
		"NaN among many dimensions": append(make([]float32, 1535), float32(math.NaN())),
	} {
		t.Run(name, func(t *testing.T) {
			var ev events
			emb := cache.EmbedderFunc(func(context.Context, []string) ([][]float32, error) { return [][]float32{v}, nil })
			sem := newSemantic(t, emb, cache.WithObserver(ev.observe))
			p := fake.New(fake.Reply("a"), fake.Reply("b"))
			cl := client(t, p, sem.Middleware())
			assert.Equal(t, "a", ask(t, cl, refund))
			assert.Equal(t, "b", ask(t, cl, refund))
			st := sem.Stats()
			assert.Equal(t, uint64(2), st.EmbedErrors)
			assert.Zero(t, st.Entries)
			assert.Zero(t, st.Bytes)
			assert.Zero(t, st.Stored)
			errs := ev.of(cache.EventStoreError)
			require.Len(t, errs, 2)
			assert.Error(t, errs[0].Err)
			assert.Empty(t, ev.of(cache.EventStored))
		})
	}

	t.Run("the cap itself is kept", func(t *testing.T) {
		sem := newSemantic(t, axisEmbedder(cache.MaxEmbeddingDimensions))
		p := fake.New(fake.Reply("x").Forever())
		cl := client(t, p, sem.Middleware())
		ask(t, cl, "q7")
		ask(t, cl, "q7")
		assert.Equal(t, 1, p.Calls())
		assert.Zero(t, sem.Stats().EmbedErrors)
	})
}

// Vectors of different lengths in one index are never compared: no panic, a miss, and
// each length still matches its own.
func TestSemanticMismatchedDimensions(t *testing.T) {
	var mu sync.Mutex
	var dims int // what the embedder answers next
	emb := cache.EmbedderFunc(func(context.Context, []string) ([][]float32, error) {
		mu.Lock()
		defer mu.Unlock()
		v := make([]float32, dims)
		v[0] = 1
		return [][]float32{v}, nil
	})
	var ev events
	sem := newSemantic(t, emb, cache.WithObserver(ev.observe))
	p := fake.New(fake.Reply("x").Forever())
	cl := client(t, p, sem.Middleware())
	setDims := func(n int) { mu.Lock(); dims = n; mu.Unlock() }

	for _, n := range []int{8, 16, 4, 1} {
		setDims(n)
		ask(t, cl, refund)
	}
	assert.Equal(t, 4, p.Calls(), "no length matches another")
	for _, n := range []int{16, 8, 1, 4} {
		setDims(n)
		ask(t, cl, refund)
	}
	assert.Equal(t, 4, p.Calls(), "each length matches its own")
	st := sem.Stats()
	assert.Equal(t, uint64(4), st.Misses)
	assert.Equal(t, uint64(4), st.Hits)
	assert.Equal(t, 4, st.Entries)
	for _, m := range ev.of(cache.EventMiss) {
		assert.Zero(t, m.Similarity, "nothing of its length to compare with")
	}
}

// Many goroutines asking, storing and evicting big answers at once (run with -race): the
// index never passes its byte bound, and its bytes and counters add up.
func TestSemanticByteBoundConcurrent(t *testing.T) {
	const bound, answer = 300 << 10, 50_000
	sem := newSemantic(t, axisEmbedder(256), cache.WithMaxSemanticBytes(bound))
	p := fake.New(fake.Reply(strings.Repeat("x", answer)).Forever())
	cl := client(t, p, sem.Middleware())
	const goroutines, calls = 6, 40
	concurrently(goroutines, calls, func(g, i int) {
		r, err := cl.Complete(context.Background(), chat(fmt.Sprintf("q%d", (g*7+i)%20)))
		if assert.NoError(t, err) {
			assert.Len(t, r.Text, answer)
		}
		assert.LessOrEqual(t, sem.Stats().Bytes, int64(bound))
	})
	st := sem.Stats()
	assert.Equal(t, uint64(goroutines*calls), st.Hits+st.Misses+st.GuardRejections+st.Bypasses)
	assert.Equal(t, uint64(p.Calls()), st.Stored)
	assert.Equal(t, st.Stored-st.Evictions-st.Expired, uint64(st.Entries))
	assert.Positive(t, st.Evictions, "20 questions of 50 kB do not fit in 300 KiB")
	assert.LessOrEqual(t, st.Bytes, int64(bound))
	assert.Greater(t, st.Bytes, int64(st.Entries*answer))
}
