package cache_test

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/ratelimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordingStore is a memory store that keeps every entry it was given.
type recordingStore struct {
	*cache.Memory
	mu  sync.Mutex
	set []*cache.Entry
}

func (s *recordingStore) Set(ctx context.Context, key string, e *cache.Entry, ttl time.Duration) error {
	s.mu.Lock()
	s.set = append(s.set, e)
	s.mu.Unlock()
	return s.Memory.Set(ctx, key, e, ttl)
}

// pricedClient serves gpt-4o-mini under OpenAI's prices, so that every upstream call has a
// known, non-zero Cost.
func pricedClient(t *testing.T, p llmclient.Provider, mw ...llmclient.Middleware) *llmclient.Client {
	t.Helper()
	opts := []llmclient.Option{llmclient.WithPricing(nil),
		llmclient.WithUpstream(llmclient.Upstream{Name: "openai", Provider: p, PriceProvider: "openai"})}
	for _, m := range mw {
		opts = append(opts, llmclient.WithMiddleware(m))
	}
	cl, err := llmclient.New(opts...)
	require.NoError(t, err)
	return cl
}

func pricedChat(text string) *llmclient.Request {
	return &llmclient.Request{Model: "gpt-4o-mini", Messages: []llmclient.Message{llmclient.UserMessage(text)}}
}

// A hit made no upstream call, so it cost a known $0: it does not report the cost of the
// call that produced the answer (summing the Cost of every response would count that
// call once per hit), and no store keeps that cost, so a memory store and a store that
// encodes entries (MarshalEntry, as rediscache does) answer alike.
func TestHitsCostNothing(t *testing.T) {
	free := pricing.Cost{Known: true}
	mem, err := cache.NewMemory(cache.MemoryConfig{})
	require.NoError(t, err)
	store := &recordingStore{Memory: mem}
	c, err := cache.New(store)
	require.NoError(t, err)
	p := fake.New(fake.Reply("hello").Usage(1000, 1000), fake.Stream("a", "b").Usage(1000, 1000))
	cl := pricedClient(t, p, c.Middleware())
	ctx := context.Background()

	first, err := cl.Complete(ctx, pricedChat("hi"))
	require.NoError(t, err)
	require.True(t, first.Cost.Known)
	require.Positive(t, first.Cost.Amount, "the call that produced the answer was paid for")
	hit, err := cl.Complete(ctx, pricedChat("hi"))
	require.NoError(t, err)
	require.True(t, hit.Cached)
	assert.Equal(t, free, hit.Cost)
	assert.Equal(t, first.Usage, hit.Usage, "the usage of the call that produced it")

	s, err := cl.Stream(ctx, pricedChat("hi"))
	require.NoError(t, err)
	_, err = readAll(t, s)
	require.NoError(t, err)
	assert.Equal(t, free, s.Response().Cost, "a stream served from the cache")

	// A streamed answer, stored at its end, is served for free too.
	s, err = cl.Stream(ctx, pricedChat("stream me"))
	require.NoError(t, err)
	_, err = readAll(t, s)
	require.NoError(t, err)
	require.Positive(t, s.Response().Cost.Amount)
	again, err := cl.Complete(ctx, pricedChat("stream me"))
	require.NoError(t, err)
	assert.Equal(t, free, again.Cost)
	assert.Equal(t, 2, p.Calls())

	store.mu.Lock()
	defer store.mu.Unlock()
	require.Len(t, store.set, 2)
	for _, e := range store.set {
		assert.Equal(t, pricing.Cost{}, e.Response.Cost, "the store keeps no cost")
		b, err := cache.MarshalEntry(e)
		require.NoError(t, err)
		decoded, err := cache.UnmarshalEntry(b)
		require.NoError(t, err)
		decoded.Created = e.Created
		assert.Equal(t, e, decoded, "what a memory store keeps is what an encoding store keeps")
	}
}

// A semantic hit costs nothing either.
func TestSemanticHitsCostNothing(t *testing.T) {
	sem := newSemantic(t, &conceptEmbedder{})
	p := fake.New(fake.Reply("refunds take 5 days").Usage(1000, 1000))
	cl := pricedClient(t, p, sem.Middleware())
	first, err := cl.Complete(context.Background(), pricedChat(refund))
	require.NoError(t, err)
	require.Positive(t, first.Cost.Amount)
	hit, err := cl.Complete(context.Background(), pricedChat(refundAgain))
	require.NoError(t, err)
	require.True(t, hit.Cached)
	assert.Equal(t, pricing.Cost{Known: true}, hit.Cost)
	assert.Equal(t, 1, p.Calls())
}

// A hit is the stored answer field by field, less what belongs to the call that produced
// it. Every exported field of Response is set here: a field added to Response and not
// kept by the cache (nor named as the call's) fails this test.
func TestHitKeepsEveryFieldOfTheAnswer(t *testing.T) {
	answer := llmclient.Response{ID: "id", Model: "m-1", Text: "t", Reasoning: "r",
		ToolCalls:    []llmclient.ToolCall{{ID: "c1", Name: "f", Arguments: "{}"}},
		FinishReason: finish.ToolCalls, RawFinishReason: "tool_use", Refusal: "",
		Usage:      llmclient.Usage{InputTokens: 3, OutputTokens: 2, TotalTokens: 5},
		RateLimits: &ratelimit.Status{}, Status: 200, Upstream: "b",
		Attempts: []llmclient.Attempt{{Upstream: "a"}, {Upstream: "b"}}, Fallback: true,
		Cost: pricing.Cost{Amount: pricing.Dollar, Known: true}}
	// The call's own fields, and the ones a stored answer cannot have.
	callFields := map[string]bool{"RateLimits": true, "Attempts": true, "Cost": true, "Cached": true,
		"Refusal": true, "Degraded": true, "Fallback": true}
	rv := reflect.ValueOf(answer)
	for i := range rv.NumField() {
		f := rv.Type().Field(i)
		if f.IsExported() && !callFields[f.Name] {
			assert.False(t, rv.Field(i).IsZero(), "set Response.%s in this test", f.Name)
		}
	}
	c, _ := newCache(t)
	h := c.Middleware()(llmclient.HandlerFuncs{CompleteFunc: func(context.Context, *llmclient.Request) (*llmclient.Response, error) {
		r := answer
		return &r, nil
	}})
	_, err := h.Complete(context.Background(), chat("hi"))
	require.NoError(t, err)
	hit, err := h.Complete(context.Background(), chat("hi"))
	require.NoError(t, err)
	want := answer
	want.RateLimits, want.Attempts, want.Cost, want.Cached, want.Fallback = nil, nil, pricing.Cost{Known: true}, true, false
	assert.Equal(t, &want, hit)
}
