package cache_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCompleteHitServesTheStoredAnswer(t *testing.T) {
	var ev events
	c, _ := newCache(t, cache.WithObserver(ev.observe))
	p := fake.New(fake.Reply("hello").Usage(5, 1), fake.Reply("second"))
	cl := client(t, p, c.Middleware())
	ctx := context.Background()

	first, err := cl.Complete(ctx, chat("hi"))
	require.NoError(t, err)
	again, err := cl.Complete(ctx, chat("hi"))
	require.NoError(t, err)
	assert.Equal(t, 1, p.Calls(), "the second call never reached the upstream")
	assert.Equal(t, "hello", again.Text)
	assert.Equal(t, first.Usage, again.Usage, "the usage of the call that produced it")
	assert.Equal(t, "a", again.Upstream)
	assert.Empty(t, again.Attempts, "no attempt was made")
	assert.Nil(t, again.RateLimits)
	assert.Equal(t, []cache.EventKind{cache.EventMiss, cache.EventStored, cache.EventHit}, ev.kinds())

	// The caller owns its copy.
	again.Text = "changed"
	third, err := cl.Complete(ctx, chat("hi"))
	require.NoError(t, err)
	assert.Equal(t, "hello", third.Text)

	other, err := cl.Complete(ctx, chat("something else"))
	require.NoError(t, err)
	assert.Equal(t, "second", other.Text)

	st := c.Stats()
	assert.Equal(t, uint64(2), st.Hits)
	assert.Equal(t, uint64(2), st.Misses)
	assert.InDelta(t, 0.5, st.HitRate(), 1e-9)
	assert.Equal(t, int64(2), st.Store.Entries)
	assert.Positive(t, st.Store.Bytes)
}

func TestPartitionsNeverShare(t *testing.T) {
	c, _ := newCache(t, cache.WithPartition(cache.PartitionByMetadata("tenant")))
	p := fake.New(fake.Reply("for acme"), fake.Reply("for globex"), fake.Reply("for ctx"))
	cl := client(t, p, c.Middleware())
	ctx := context.Background()
	req := func(tenant string) *llmclient.Request {
		r := chat("hi")
		r.Metadata = map[string]string{"tenant": tenant}
		return r
	}
	a, err := cl.Complete(ctx, req("acme"))
	require.NoError(t, err)
	b, err := cl.Complete(ctx, req("globex"))
	require.NoError(t, err)
	assert.Equal(t, "for acme", a.Text)
	assert.Equal(t, "for globex", b.Text)
	// The context's partition counts when the metadata names none.
	byCtx, err := cl.Complete(llmclient.WithPartition(ctx, "initech"), chat("hi"))
	require.NoError(t, err)
	assert.Equal(t, "for ctx", byCtx.Text)
	again, err := cl.Complete(ctx, req("acme"))
	require.NoError(t, err)
	assert.Equal(t, "for acme", again.Text)
	assert.Equal(t, 3, p.Calls())
}

// TTLs run in virtual time: a hit until the TTL, a miss after it.
func TestTTLInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newCache(t, cache.WithTTL(time.Hour))
		p := fake.New(fake.Reply("first"), fake.Reply("second"))
		cl := client(t, p, c.Middleware())
		ctx := context.Background()
		_, err := cl.Complete(ctx, chat("hi"))
		require.NoError(t, err)
		time.Sleep(time.Hour - time.Millisecond)
		r, err := cl.Complete(ctx, chat("hi"))
		require.NoError(t, err)
		assert.Equal(t, "first", r.Text)
		time.Sleep(time.Millisecond)
		r, err = cl.Complete(ctx, chat("hi"))
		require.NoError(t, err)
		assert.Equal(t, "second", r.Text)
		assert.Equal(t, 2, p.Calls())
	})
}

func TestControls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ev events
		c, m := newCache(t, cache.WithObserver(ev.observe))
		p := fake.New(fake.Reply("v1"), fake.Reply("v2"), fake.Reply("v3"), fake.Reply("v4"), fake.Reply("v5"))
		cl := client(t, p, c.Middleware())
		ctx := context.Background()
		text := func(ctx context.Context) string {
			r, err := cl.Complete(ctx, chat("hi"))
			require.NoError(t, err)
			return r.Text
		}
		assert.Equal(t, "v1", text(ctx))
		// no-store: neither lookup nor store.
		assert.Equal(t, "v2", text(cache.WithControl(ctx, cache.Control{NoStore: true})))
		assert.Equal(t, "v1", text(ctx))
		// no-cache: skip the lookup, store the fresh answer.
		assert.Equal(t, "v3", text(cache.WithControl(ctx, cache.Control{NoCache: true})))
		assert.Equal(t, "v3", text(ctx))
		// max-age: only younger entries.
		time.Sleep(10 * time.Minute)
		assert.Equal(t, "v3", text(cache.WithControl(ctx, cache.Control{MaxAge: 11 * time.Minute})))
		assert.Equal(t, "v4", text(cache.WithControl(ctx, cache.Control{MaxAge: 10 * time.Minute})))
		assert.Equal(t, "v4", text(ctx), "the fresh answer replaced the old one")
		// A negative max-age accepts nothing, like no-cache.
		assert.Equal(t, "v5", text(cache.WithControl(ctx, cache.Control{MaxAge: -time.Second})))
		assert.Equal(t, int64(1), m.StoreStats().Entries)
		assert.Len(t, ev.of(cache.EventBypass), 3)
	})
}

// A stream served from the cache replays the original chunk by chunk, and its response.
func TestStreamReplayedChunkByChunk(t *testing.T) {
	c, _ := newCache(t)
	p := fake.New(fake.StreamChunks(
		llmclient.Chunk{Reasoning: "thinking"},
		llmclient.Chunk{Text: "Hel"},
		llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 0, ID: "t1", Name: "f", Arguments: `{"a"`}}},
		llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 0, Arguments: `:1}`}}},
		llmclient.Chunk{Text: "lo"},
	).Usage(9, 4))
	cl := client(t, p, c.Middleware())
	ctx := context.Background()

	s, err := cl.Stream(ctx, chat("hi"))
	require.NoError(t, err)
	live, err := readAll(t, s)
	require.NoError(t, err)
	liveResp := *s.Response()

	s2, err := cl.Stream(ctx, chat("hi"))
	require.NoError(t, err)
	replay, err := readAll(t, s2)
	require.NoError(t, err)
	assert.Equal(t, 1, p.Calls())
	require.Len(t, replay, len(live))
	assert.Equal(t, live, replay, "chunk by chunk")
	got := s2.Response()
	liveResp.Attempts, liveResp.RateLimits, liveResp.Cached = nil, nil, true
	liveResp.Cost = pricing.Cost{Known: true} // no upstream call: a known $0
	assert.Equal(t, &liveResp, got)
	assert.Equal(t, "Hello", got.Text)
	require.Len(t, got.ToolCalls, 1)
	assert.Equal(t, `{"a":1}`, got.ToolCalls[0].Arguments)

	// The same answer serves Complete.
	r, err := cl.Complete(ctx, chat("hi"))
	require.NoError(t, err)
	assert.Equal(t, "Hello", r.Text)
	assert.Equal(t, 1, p.Calls())
}

// An answer stored by Complete serves a Stream as one chunk.
func TestCompleteAnswerServesStream(t *testing.T) {
	c, _ := newCache(t)
	p := fake.New(fake.Reply("whole").ToolCall("t1", "f", `{}`).Usage(3, 2))
	cl := client(t, p, c.Middleware())
	ctx := context.Background()
	want, err := cl.Complete(ctx, chat("hi"))
	require.NoError(t, err)
	s, err := cl.Stream(ctx, chat("hi"))
	require.NoError(t, err)
	chunks, err := readAll(t, s)
	require.NoError(t, err)
	require.Len(t, chunks, 1)
	assert.Equal(t, "whole", chunks[0].Text)
	assert.Equal(t, want.FinishReason, chunks[0].FinishReason)
	require.NotNil(t, chunks[0].Usage)
	assert.Equal(t, want.Usage, *chunks[0].Usage)
	assert.Equal(t, want.ToolCalls, s.Response().ToolCalls)
	assert.Equal(t, 1, p.Calls())
}

// Only complete, successful, non-degraded answers are stored.
func TestStreamsThatDidNotEndCleanlyAreNotStored(t *testing.T) {
	cases := []struct {
		name string
		step fake.Step
		read func(t *testing.T, s *llmclient.Stream)
		opts []llmclient.Option
	}{
		{"cut", fake.Stream("a", "b", "c").CutAfter(2), nil, nil},
		{"failed mid-stream", fake.Stream("a", "b").FailAfter(1, fake.Fail(500)), nil, nil},
		{"filtered", fake.Stream("a", "b").Finish(finish.ContentFilter), nil, nil},
		{"closed early", fake.Stream("a", "b", "c"), func(t *testing.T, s *llmclient.Stream) {
			require.True(t, s.Next())
			s.Close()
		}, nil},
		{"degraded", fake.Fail(503), nil, []llmclient.Option{llmclient.WithMaxAttempts(1),
			llmclient.WithFallback(func(context.Context, *llmclient.Request, error) (*llmclient.Response, error) {
				return &llmclient.Response{Text: "canned", FinishReason: finish.Stop}, nil
			})}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ev events
			c, m := newCache(t, cache.WithObserver(ev.observe))
			p := fake.New(tc.step)
			cl := client(t, p, c.Middleware(), tc.opts...)
			s, err := cl.Stream(context.Background(), chat("hi"))
			require.NoError(t, err)
			if tc.read != nil {
				tc.read(t, s)
			} else {
				readAll(t, s)
			}
			assert.Equal(t, int64(0), m.StoreStats().Entries)
			require.Len(t, ev.of(cache.EventNotStored), 1)
			assert.Equal(t, uint64(1), c.Stats().NotStored)
		})
	}
}

func TestNotStorableAnswers(t *testing.T) {
	answers := map[string]*llmclient.Response{
		"degraded": {Text: "x", FinishReason: finish.Stop, Degraded: true},
		"filtered": {Text: "x", FinishReason: finish.ContentFilter},
		"refused":  {Refusal: "no", FinishReason: finish.Stop},
	}
	for name, resp := range answers {
		t.Run(name, func(t *testing.T) {
			c, m := newCache(t)
			calls := 0
			h := c.Middleware()(llmclient.HandlerFuncs{CompleteFunc: func(context.Context, *llmclient.Request) (*llmclient.Response, error) {
				calls++
				r := *resp
				return &r, nil
			}})
			for range 2 {
				_, err := h.Complete(context.Background(), chat("hi"))
				require.NoError(t, err)
			}
			assert.Equal(t, 2, calls)
			assert.Equal(t, int64(0), m.StoreStats().Entries)
		})
	}
	// A fallback to another upstream is a real answer and is stored.
	c, _ := newCache(t)
	calls := 0
	h := c.Middleware()(llmclient.HandlerFuncs{CompleteFunc: func(context.Context, *llmclient.Request) (*llmclient.Response, error) {
		calls++
		return &llmclient.Response{Text: "x", FinishReason: finish.Stop, Fallback: true, Upstream: "b"}, nil
	}})
	for i := range 2 {
		r, err := h.Complete(context.Background(), chat("hi"))
		require.NoError(t, err)
		assert.Equal(t, i == 0, r.Fallback, "the call that failed over is a fallback; the cache hit is not")
		assert.Equal(t, i == 1, r.Cached)
	}
	assert.Equal(t, 1, calls)
}

// A stream longer than the entry bound is delivered in full but not stored.
func TestStreamLargerThanTheBoundIsNotStored(t *testing.T) {
	var ev events
	c, m := newCache(t, cache.WithMaxEntryBytes(1000), cache.WithObserver(ev.observe))
	p := fake.New(fake.Stream(strings.Repeat("x", 600), strings.Repeat("y", 600)))
	cl := client(t, p, c.Middleware())
	s, err := cl.Stream(context.Background(), chat("hi"))
	require.NoError(t, err)
	chunks, err := readAll(t, s)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(chunks), 2)
	assert.Equal(t, int64(0), m.StoreStats().Entries)
	require.Len(t, ev.of(cache.EventNotStored), 1)
	assert.ErrorIs(t, ev.of(cache.EventNotStored)[0].Err, cache.ErrTooLarge)
}

// failingStore fails every call, or blocks until the call's context ends.
type failingStore struct{ block bool }

var errStoreDown = errors.New("store down")

func (f failingStore) Get(ctx context.Context, _ string) (*cache.Entry, error) {
	if f.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return nil, errStoreDown
}

func (f failingStore) Set(ctx context.Context, _ string, _ *cache.Entry, _ time.Duration) error {
	if f.block {
		<-ctx.Done()
		return ctx.Err()
	}
	return errStoreDown
}

// A store that fails or hangs never fails or holds a call: a lookup is a miss, bounded by
// the store timeout, and the store of the answer is not waited for (Flush waits for it).
func TestStoreFailuresFailOpen(t *testing.T) {
	for _, block := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			var ev events
			c, err := cache.New(failingStore{block: block}, cache.WithObserver(ev.observe), cache.WithStoreTimeout(time.Second))
			require.NoError(t, err)
			p := fake.New(fake.Reply("ok").Forever())
			cl := client(t, p, c.Middleware())
			start := time.Now()
			r, err := cl.Complete(context.Background(), chat("hi"))
			require.NoError(t, err)
			assert.Equal(t, "ok", r.Text)
			if block {
				assert.Equal(t, time.Second, time.Since(start), "one timeout, for the lookup")
			}
			require.NoError(t, c.Flush(context.Background()))
			if block {
				assert.Equal(t, 2*time.Second, time.Since(start), "the store ended at its timeout")
			}
			assert.Len(t, ev.of(cache.EventStoreError), 2)
			assert.Equal(t, uint64(2), c.Stats().StoreErrors)
		})
	}
}

func TestNewValidates(t *testing.T) {
	m, err := cache.NewMemory(cache.MemoryConfig{})
	require.NoError(t, err)
	_, err = cache.New(nil)
	assert.Error(t, err)
	for name, o := range map[string]cache.Option{
		"negative ttl":           cache.WithTTL(-time.Second),
		"negative idempotency":   cache.WithIdempotencyTTL(-1),
		"negative store timeout": cache.WithStoreTimeout(-1),
		"negative entry bytes":   cache.WithMaxEntryBytes(-1),
		"nil partition":          cache.WithPartition(nil),
	} {
		_, err := cache.New(m, o)
		assert.Error(t, err, name)
	}
	// Huge values are clamped, zero ones documented.
	_, err = cache.New(m, cache.WithTTL(time.Duration(1<<63-1)), cache.WithIdempotencyTTL(time.Duration(1<<63-1)),
		cache.WithMaxEntryBytes(int(^uint(0)>>1)), cache.WithStoreTimeout(0), nil)
	assert.NoError(t, err)
}

// WithTTL(0) turns the exact cache off.
func TestTTLZeroDisablesTheCache(t *testing.T) {
	c, m := newCache(t, cache.WithTTL(0))
	p := fake.New(fake.Reply("a"), fake.Reply("b"))
	cl := client(t, p, c.Middleware())
	for _, want := range []string{"a", "b"} {
		r, err := cl.Complete(context.Background(), chat("hi"))
		require.NoError(t, err)
		assert.Equal(t, want, r.Text)
	}
	assert.Equal(t, int64(0), m.StoreStats().Entries)
}

// Close may come from another goroutine while the reader reads: the recording is not
// stored, and nothing races (run with -race).
func TestStreamClosedConcurrently(t *testing.T) {
	synctest.Test(t, streamClosedConcurrently)
}

// streamClosedConcurrently runs in a bubble: the stream's end stays 2.5 s away however
// slow the machine.
func streamClosedConcurrently(t *testing.T) {
	c, m := newCache(t)
	p := fake.New(fake.Stream(strings.Split("abcdefghijklmnopqrstuvwxyz", "")...).ChunkDelay(100 * time.Millisecond))
	cl := client(t, p, c.Middleware())
	s, err := cl.Stream(context.Background(), chat("hi"))
	require.NoError(t, err)
	reading := make(chan struct{}, 1)
	s.Tap(func(llmclient.Chunk) {
		select {
		case reading <- struct{}{}:
		default:
		}
	}, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for s.Next() {
		}
	}()
	<-reading // the stream is being read; its end is 2.5 s away
	s.Close()
	<-done
	assert.Equal(t, int64(0), m.StoreStats().Entries)
}

// The entry bound is the entry's size (Entry.Size: the answer and its chunks), not its
// chunks alone: with the defaults, a stream of 600 kB records chunks within the cache's
// bound (1 MiB) but makes an entry of about 1.2 MB, which the memory store (whose bound is
// also 1 MiB) declines; the cache used to report it stored all the same.
func TestStreamEntryBoundCountsTheWholeEntry(t *testing.T) {
	for name, tc := range map[string]struct {
		opts []cache.Option
		text string
	}{
		"defaults":        {nil, strings.Repeat("x", 300_000)},
		"a smaller bound": {[]cache.Option{cache.WithMaxEntryBytes(1500)}, strings.Repeat("x", 300)},
	} {
		t.Run(name, func(t *testing.T) {
			var ev events
			c, m := newCache(t, append(tc.opts, cache.WithObserver(ev.observe))...)
			p := fake.New(fake.Stream(tc.text, tc.text), fake.Reply("second"))
			cl := client(t, p, c.Middleware())
			s, err := cl.Stream(context.Background(), chat("hi"))
			require.NoError(t, err)
			chunks, err := readAll(t, s)
			require.NoError(t, err)
			assert.GreaterOrEqual(t, len(chunks), 2, "delivered in full")
			assert.Empty(t, ev.of(cache.EventStored))
			require.Len(t, ev.of(cache.EventNotStored), 1)
			assert.ErrorIs(t, ev.of(cache.EventNotStored)[0].Err, cache.ErrTooLarge)
			st := c.Stats()
			assert.Equal(t, uint64(0), st.Stored)
			assert.Equal(t, uint64(1), st.NotStored)
			assert.Equal(t, cache.StoreStats{}, m.StoreStats(), "nothing reached the store")
		})
	}
}

// slowSetStore misses at once and holds every Set until its context ends.
type slowSetStore struct{}

func (slowSetStore) Get(context.Context, string) (*cache.Entry, error) { return nil, nil }

func (slowSetStore) Set(ctx context.Context, _ string, _ *cache.Entry, _ time.Duration) error {
	<-ctx.Done()
	return ctx.Err()
}

// WithStoreTimeout(0) leaves the caller's context as the only bound: a store that does
// not answer holds the call until that context ends, not for ever (a store after the
// answer runs detached from the caller's cancellation only under a store timeout).
func TestStoreTimeoutZeroIsBoundedByTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ev events
		c, err := cache.New(slowSetStore{}, cache.WithStoreTimeout(0), cache.WithObserver(ev.observe))
		require.NoError(t, err)
		cl := client(t, fake.New(fake.Reply("ok")), c.Middleware())
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		r, err := cl.Complete(ctx, chat("hi"))
		require.NoError(t, err)
		assert.Equal(t, "ok", r.Text, "the answer, though it could not be stored")
		assert.Equal(t, time.Second, time.Since(start))
		assert.Len(t, ev.of(cache.EventStoreError), 1)
	})
}
