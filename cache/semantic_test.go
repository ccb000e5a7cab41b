package cache_test

import (
	"context"
	"errors"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// conceptEmbedder is a deterministic fake embedding model that, like real ones, puts
// questions on one topic close together: each word adds to the dimension of its concept,
// with a topic's words weighing most. "refund" and "return" are one concept (money back),
// so "how do I get a refund" and "how do I return an item" embed at cosine 0.96: only a
// guard tells them apart. Words it does not know get a dimension of their own by hash.
type conceptEmbedder struct {
	mu    sync.Mutex
	calls int
	fail  error
}

const embedDims = 64

var concepts = map[string]struct {
	dim    int
	weight float32
}{
	"refund": {0, 5}, "return": {0, 5}, "money": {0, 5}, "back": {0, 1},
	"get": {1, 1}, "obtain": {1, 1},
	"item": {2, 1}, "product": {2, 1},
	"hours": {3, 5}, "open": {3, 5}, "opening": {3, 5},
}

func (e *conceptEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	e.mu.Lock()
	e.calls++
	fail := e.fail
	e.mu.Unlock()
	if fail != nil {
		return nil, fail
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, embedDims)
		for _, w := range cache.Words(t) {
			if c, ok := concepts[w]; ok {
				v[c.dim] += c.weight
				continue
			}
			if stop[w] {
				continue
			}
			h := fnv.New32a()
			h.Write([]byte(w))
			v[8+int(h.Sum32()%(embedDims-8))] += 1
		}
		out[i] = v
	}
	return out, nil
}

var stop = map[string]bool{"how": true, "do": true, "i": true, "can": true, "a": true, "an": true, "my": true,
	"what": true, "is": true, "the": true, "to": true, "are": true, "your": true, "me": true}

func cosine(t *testing.T, e cache.Embedder, a, b string) float64 {
	v, err := e.Embed(context.Background(), []string{a, b})
	require.NoError(t, err)
	var dot, na, nb float64
	for i := range v[0] {
		dot += float64(v[0][i]) * float64(v[1][i])
		na += float64(v[0][i]) * float64(v[0][i])
		nb += float64(v[1][i]) * float64(v[1][i])
	}
	return dot / math.Sqrt(na*nb)
}

const (
	refund       = "How do I get a refund?"
	refundAgain  = "how can I get a refund"
	returnItem   = "How do I return an item?"
	openingHours = "What are your opening hours?"
)

func newSemantic(t *testing.T, emb cache.Embedder, opts ...cache.Option) *cache.Semantic {
	t.Helper()
	s, err := cache.NewSemantic(emb, opts...)
	require.NoError(t, err)
	return s
}

func ask(t *testing.T, cl *llmclient.Client, q string) string {
	t.Helper()
	r, err := cl.Complete(context.Background(), chat(q))
	require.NoError(t, err)
	return r.Text
}

// The acceptance test: the embedder puts refund and return close together, above the
// threshold, so without a guard the return question gets the refund answer; the guard
// keeps them apart while two phrasings of the refund question still match.
func TestSemanticGuardKeepsRefundAndReturnApart(t *testing.T) {
	emb := &conceptEmbedder{}
	require.Greater(t, cosine(t, emb, refund, returnItem), cache.DefaultThreshold, "the fake makes them near")
	require.InDelta(t, 1, cosine(t, emb, refund, refundAgain), 1e-6)
	require.Less(t, cosine(t, emb, refund, openingHours), 0.5)

	t.Run("without a guard the near question is answered wrongly", func(t *testing.T) {
		sem := newSemantic(t, emb)
		p := fake.New(fake.Reply("refund policy"), fake.Reply("return policy"))
		cl := client(t, p, sem.Middleware())
		assert.Equal(t, "refund policy", ask(t, cl, refund))
		assert.Equal(t, "refund policy", ask(t, cl, returnItem), "the incident the guard exists for")
	})

	for name, guard := range map[string]cache.Guard{
		"term overlap":  cache.MinTermOverlap(0.5),
		"same terms":    cache.RequireSameTerms("refund", "return"),
		"own predicate": func(q, c string) bool { return (cosine(t, emb, q, c) > 0.99) },
	} {
		t.Run(name, func(t *testing.T) {
			var ev events
			sem := newSemantic(t, emb, cache.WithGuards(guard), cache.WithObserver(ev.observe))
			p := fake.New(fake.Reply("refund policy"), fake.Reply("return policy"), fake.Reply("9 to 5"))
			cl := client(t, p, sem.Middleware())
			assert.Equal(t, "refund policy", ask(t, cl, refund))
			assert.Equal(t, "refund policy", ask(t, cl, refundAgain), "two phrasings of one question match")
			assert.Equal(t, "return policy", ask(t, cl, returnItem), "the guard sends the near question to the model")
			assert.Equal(t, "return policy", ask(t, cl, "how do I return an item"), "and its own phrasing matches it")
			assert.Equal(t, "9 to 5", ask(t, cl, openingHours))
			assert.Equal(t, 3, p.Calls())

			st := sem.Stats()
			assert.Equal(t, uint64(2), st.Hits)
			assert.Equal(t, uint64(2), st.Misses)
			assert.Equal(t, uint64(1), st.GuardRejections)
			assert.Equal(t, 3, st.Entries)
			assert.InDelta(t, 0.4, st.HitRate(), 1e-9)
			rej := ev.of(cache.EventGuardRejected)
			require.Len(t, rej, 1)
			assert.True(t, rej[0].Semantic)
			assert.Greater(t, rej[0].Similarity, cache.DefaultThreshold)
			hits := ev.of(cache.EventHit)
			require.Len(t, hits, 2)
			assert.InDelta(t, 1, hits[0].Similarity, 1e-6)
		})
	}
}

// Only the last user message's text is compared; the rest of the request must be the
// same, and partitions never share.
func TestSemanticScope(t *testing.T) {
	sem := newSemantic(t, &conceptEmbedder{}, cache.WithPartition(cache.PartitionByMetadata("tenant")))
	p := fake.New(fake.Reply("a").Forever())
	cl := client(t, p, sem.Middleware())
	ctx := context.Background()
	base := chat(refund)
	_, err := cl.Complete(ctx, base)
	require.NoError(t, err)

	sys := chat(refundAgain)
	sys.Messages = append([]llmclient.Message{llmclient.SystemMessage("be rude")}, sys.Messages...)
	model := chat(refundAgain)
	model.Model = "other"
	tenant := chat(refundAgain)
	tenant.Metadata = map[string]string{"tenant": "t2"}
	notUser := &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage(refund), llmclient.AssistantMessage(refundAgain)}}
	image := chat(refundAgain)
	image.Messages[0].Content = append(image.Messages[0].Content, llmclient.ImageURLPart("https://x/y.png"))
	named := chat(refundAgain) // the question's Name reaches the vendor (OpenAI's name)
	named.Messages[0].Name = "ann"
	for _, r := range []*llmclient.Request{sys, model, tenant, notUser, image, named} {
		_, err := cl.Complete(ctx, r)
		require.NoError(t, err)
	}
	assert.Equal(t, 7, p.Calls(), "none of them matched the first question")
	assert.Equal(t, uint64(2), sem.Stats().Bypasses, "no user text question")
	_, err = cl.Complete(ctx, chat(refundAgain))
	require.NoError(t, err)
	assert.Equal(t, 7, p.Calls())
}

func TestSemanticStreamsAndControls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sem := newSemantic(t, &conceptEmbedder{}, cache.WithTTL(time.Hour))
		p := fake.New(fake.Stream("re", "fund"), fake.Reply("second"), fake.Reply("third"), fake.Reply("fourth"))
		cl := client(t, p, sem.Middleware())
		ctx := context.Background()
		s, err := cl.Stream(ctx, chat(refund))
		require.NoError(t, err)
		live, err := readAll(t, s)
		require.NoError(t, err)
		s, err = cl.Stream(ctx, chat(refundAgain))
		require.NoError(t, err)
		again, err := readAll(t, s)
		require.NoError(t, err)
		assert.Equal(t, live, again, "replayed chunk by chunk")
		assert.Equal(t, "refund", ask(t, cl, refundAgain))
		assert.Equal(t, 1, p.Calls())

		r, err := cl.Complete(cache.WithControl(ctx, cache.Control{NoStore: true}), chat(refundAgain))
		require.NoError(t, err)
		assert.Equal(t, "second", r.Text)
		r, err = cl.Complete(cache.WithControl(ctx, cache.Control{NoCache: true}), chat(refundAgain))
		require.NoError(t, err)
		assert.Equal(t, "third", r.Text)
		assert.Equal(t, 2, sem.Stats().Entries, "no-cache stores, no-store does not")
		time.Sleep(time.Hour)
		assert.Equal(t, "fourth", ask(t, cl, refundAgain), "expired in virtual time")
	})
}

// An embedder that fails, or returns unusable vectors, sends the call to the model.
func TestSemanticEmbedderFailuresFailOpen(t *testing.T) {
	for name, emb := range map[string]cache.Embedder{
		"error": &conceptEmbedder{fail: errors.New("embedder down")},
		"zero vector": cache.EmbedderFunc(func(context.Context, []string) ([][]float32, error) {
			return [][]float32{make([]float32, 4)}, nil
		}),
		"NaN": cache.EmbedderFunc(func(context.Context, []string) ([][]float32, error) {
			return [][]float32{{float32(math.NaN()), 1}}, nil
		}),
		"wrong count": cache.EmbedderFunc(func(context.Context, []string) ([][]float32, error) {
			return [][]float32{{1}, {1}}, nil
		}),
	} {
		t.Run(name, func(t *testing.T) {
			var ev events
			sem := newSemantic(t, emb, cache.WithObserver(ev.observe))
			p := fake.New(fake.Reply("a"), fake.Reply("b"))
			cl := client(t, p, sem.Middleware())
			assert.Equal(t, "a", ask(t, cl, refund))
			assert.Equal(t, "b", ask(t, cl, refund))
			assert.Equal(t, uint64(2), sem.Stats().EmbedErrors)
			assert.Len(t, ev.of(cache.EventStoreError), 2)
		})
	}
}

// The index stays within its bound, dropping the least recently used questions.
func TestSemanticBounded(t *testing.T) {
	sem := newSemantic(t, &conceptEmbedder{}, cache.WithMaxEntries(2))
	p := fake.New(fake.Reply("x").Forever())
	cl := client(t, p, sem.Middleware())
	for _, q := range []string{refund, openingHours, "tell me about penguins", "what about walruses"} {
		ask(t, cl, q)
	}
	assert.Equal(t, 2, sem.Stats().Entries)
	calls := p.Calls()
	ask(t, cl, refundAgain)
	assert.Equal(t, calls+1, p.Calls(), "the refund question was dropped")
}

func TestNewSemanticValidates(t *testing.T) {
	_, err := cache.NewSemantic(nil)
	assert.Error(t, err)
	for _, th := range []float64{0, -0.5, 1.01, math.NaN(), math.Inf(1)} {
		_, err := cache.NewSemantic(&conceptEmbedder{}, cache.WithThreshold(th))
		assert.Error(t, err, "threshold %v", th)
	}
	_, err = cache.NewSemantic(&conceptEmbedder{}, cache.WithMaxEntries(-1))
	assert.Error(t, err)
	_, err = cache.NewSemantic(&conceptEmbedder{}, cache.WithGuards(nil))
	assert.Error(t, err)
	_, err = cache.NewSemantic(&conceptEmbedder{}, cache.WithThreshold(1), cache.WithMaxEntries(1<<40))
	assert.NoError(t, err)
}

// The exact cache ignores the semantic options' values but refuses invalid ones, as the
// Option doc says; valid ones change nothing for it.
func TestNewRefusesInvalidSemanticOptions(t *testing.T) {
	m, err := cache.NewMemory(cache.MemoryConfig{})
	require.NoError(t, err)
	for _, o := range []cache.Option{cache.WithThreshold(0), cache.WithMaxEntries(-1), cache.WithMaxSemanticBytes(-1)} {
		_, err := cache.New(m, o)
		assert.Error(t, err)
	}
	_, err = cache.New(m, cache.WithThreshold(0.5), cache.WithMaxEntries(3), cache.WithMaxSemanticBytes(1))
	assert.NoError(t, err)
}

func TestGuards(t *testing.T) {
	overlap := cache.MinTermOverlap(0.5)
	assert.True(t, overlap(refund, refundAgain))
	assert.False(t, overlap(refund, returnItem))
	assert.True(t, overlap("how?", "what?"), "no content words on either side")
	assert.False(t, cache.MinTermOverlap(math.NaN())("get a refund now", "get a refund"), "NaN is the strictest")
	assert.True(t, cache.MinTermOverlap(-3)("a b", "c d"), "clamped to 0")
	same := cache.RequireSameTerms("refund", "gift card")
	assert.True(t, same("refund my gift card", "Gift-card REFUND?"))
	assert.False(t, same("refund my gift card", "refund my card"))
	assert.True(t, cache.RequireSameTerms()("a", "b"))
}

// FuzzGuards: the word splitter and the guards take any text.
func FuzzGuards(f *testing.F) {
	f.Add("How do I get a refund?", "how do I return an item")
	f.Add("", "\xff\x00 gift card")
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, w := range cache.Words(a) {
			if w == "" {
				t.Fatal("empty word")
			}
		}
		assert.True(t, cache.MinTermOverlap(0.5)(a, a), "a question overlaps itself")
		assert.True(t, cache.RequireSameTerms("refund", "gift card")(a, a))
		_ = cache.MinTermOverlap(0.5)(a, b)
	})
}

// A miss reports the best similarity among the questions it was compared with, below the
// threshold, so that the threshold can be tuned from the events; a miss with nothing to
// compare with reports none.
func TestSemanticMissReportsTheNearestQuestion(t *testing.T) {
	var ev events
	emb := &conceptEmbedder{}
	sem := newSemantic(t, emb, cache.WithObserver(ev.observe))
	p := fake.New(fake.Reply("x").Forever())
	cl := client(t, p, sem.Middleware())
	ask(t, cl, refund)
	const near = "how do I get a refund for my broken product bought today in the shop"
	want := cosine(t, emb, near, refund)
	require.Less(t, want, cache.DefaultThreshold)
	require.Positive(t, want)
	ask(t, cl, near)
	misses := ev.of(cache.EventMiss)
	require.Len(t, misses, 2)
	assert.Zero(t, misses[0].Similarity, "nothing to compare with")
	assert.InDelta(t, want, misses[1].Similarity, 1e-6)
}

// Many goroutines asking, storing and evicting at once (run with -race): the index stays
// within its bound, its bytes are those of what it holds, and the counters add up.
func TestSemanticConcurrent(t *testing.T) {
	sem := newSemantic(t, &conceptEmbedder{}, cache.WithMaxEntries(8))
	p := fake.New(fake.Reply("x").Forever())
	cl := client(t, p, sem.Middleware())
	questions := []string{refund, refundAgain, returnItem, openingHours, "tell me about penguins",
		"what about walruses", "where is my order", "cancel my subscription", "how tall is the tower",
		"who wrote this", "when do you close", "what is the weather"}
	const goroutines, calls = 6, 30
	concurrently(goroutines, calls, func(g, i int) {
		r, err := cl.Complete(context.Background(), chat(questions[(g*7+i)%len(questions)]))
		if assert.NoError(t, err) {
			assert.Equal(t, "x", r.Text)
		}
		assert.LessOrEqual(t, sem.Stats().Entries, 8)
	})
	st := sem.Stats()
	assert.Equal(t, uint64(goroutines*calls), st.Hits+st.Misses+st.GuardRejections+st.Bypasses)
	assert.Equal(t, uint64(p.Calls()), st.Stored)
	assert.Equal(t, st.Stored-st.Evictions-st.Expired, uint64(st.Entries))
	if st.Entries == 0 {
		assert.Zero(t, st.Bytes)
	} else {
		assert.Positive(t, st.Bytes)
	}
}

// WithThreshold(1), which the doc allows, matches a question whose embedding points the
// same way, and only such a question: float32 rounding made the similarity of a vector
// with itself 0.99999994 or so about half the time, and the same question missed.
func TestSemanticThresholdOneMatchesTheSameVector(t *testing.T) {
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 1))
		v := make([]float32, 1536)
		for j := range v {
			v[j] = float32(r.NormFloat64())
		}
		var next []float32 // what the embedder answers next
		emb := cache.EmbedderFunc(func(context.Context, []string) ([][]float32, error) { return [][]float32{next}, nil })
		sem := newSemantic(t, emb, cache.WithThreshold(1))
		p := fake.New(fake.Reply("x").Forever())
		cl := client(t, p, sem.Middleware())
		next = v
		ask(t, cl, "the question")
		scaled := make([]float32, len(v)) // the same direction
		for j := range v {
			scaled[j] = 2 * v[j]
		}
		next = scaled
		ask(t, cl, "the question, again")
		require.Equal(t, 1, p.Calls(), "seed %d: the same direction matches", seed)
		other := slices.Clone(v)
		other[0] += 0.05
		next = other
		ask(t, cl, "another question")
		require.Equal(t, 2, p.Calls(), "seed %d: another direction does not", seed)
	}
}
