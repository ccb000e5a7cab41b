package cache_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowStore is a memory store whose writes take delay (or fail when their context ends
// first), as a Redis that holds writes does (CLIENT PAUSE WRITE during a failover). It
// holds its Memory in a field, not embedded: the cache would take it for a store that
// never blocks.
type slowStore struct {
	m     *cache.Memory
	delay time.Duration
}

func newSlowStore(t *testing.T, delay time.Duration) slowStore {
	m, err := cache.NewMemory(cache.MemoryConfig{})
	require.NoError(t, err)
	return slowStore{m: m, delay: delay}
}

func (s slowStore) Get(ctx context.Context, key string) (*cache.Entry, error) {
	return s.m.Get(ctx, key)
}

func (s slowStore) Set(ctx context.Context, key string, e *cache.Entry, ttl time.Duration) error {
	select {
	case <-time.After(s.delay):
		return s.m.Set(ctx, key, e, ttl)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// The store of an answer does not hold the call that brought it: a Redis that holds
// writes held each answer for the store timeout, past the caller's deadline (an answer
// the upstream gave at once came after 5 s to a caller with a 1 s deadline), and every
// answer for up to 250 ms with the defaults. The store goes on behind the call, within
// the store timeout, for Complete and Stream calls, alone, shared or under an
// idempotency key; Flush waits for it.
func TestAnswerDoesNotWaitForItsStore(t *testing.T) {
	for name, tc := range map[string]struct {
		opts   []cache.Option
		key    string // idempotency key
		stream bool
		writes int // the exact cache's, and the idempotency key's
	}{
		"complete":          {writes: 1},
		"shared complete":   {opts: []cache.Option{cache.WithDedup(true)}, writes: 1},
		"idempotent":        {key: "job", writes: 2},
		"stream":            {stream: true, writes: 1},
		"idempotent stream": {key: "job", stream: true, writes: 2},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var ev events
				opts := append([]cache.Option{cache.WithStoreTimeout(5 * time.Second), cache.WithObserver(ev.observe)}, tc.opts...)
				c, err := cache.New(newSlowStore(t, time.Hour), opts...)
				require.NoError(t, err)
				var reply fake.Step = fake.Reply("ok")
				if tc.stream {
					reply = fake.Stream("o", "k")
				}
				cl := client(t, fake.New(reply), c.Middleware())
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				if tc.key != "" {
					ctx = cache.WithIdempotencyKey(ctx, tc.key)
				}
				start := time.Now()
				if tc.stream {
					s, err := cl.Stream(ctx, chat("hi"))
					require.NoError(t, err)
					var text string
					for s.Next() {
						text += s.Current().Text
					}
					require.NoError(t, s.Err())
					assert.Equal(t, "ok", text)
					assert.Zero(t, time.Since(start), "the stream's end waited for its store")
					s.Close()
				} else {
					r, err := cl.Complete(ctx, chat("hi"))
					require.NoError(t, err)
					assert.Equal(t, "ok", r.Text)
				}
				assert.Zero(t, time.Since(start), "the answer waited for its store")
				assert.NoError(t, ctx.Err(), "the answer came after the caller's deadline")
				assert.Empty(t, ev.of(cache.EventStoreError), "not yet: the store is under way")

				require.NoError(t, c.Flush(context.Background()))
				assert.Equal(t, time.Duration(tc.writes)*5*time.Second, time.Since(start),
					"each store ended at the store timeout")
				assert.Len(t, ev.of(cache.EventStoreError), tc.writes)
				assert.Equal(t, uint64(tc.writes), c.Stats().StoreErrors)
			})
		})
	}
}

// While a shared or idempotent call's answer is being stored, a repeat of the call in the
// same process gets it at once from the call, which stays joinable until the store has
// it: a de-duplication follower or an idempotent retry does not pay for a second call.
// Once stored, the answer serves the repeats from the store. Without de-duplication, a
// repeat that comes before the store is done is a miss.
func TestRepeatWhileTheAnswerIsStored(t *testing.T) {
	for name, tc := range map[string]struct {
		opts  []cache.Option
		key   string
		calls int // upstream calls for the first call and its repeat during the store
	}{
		"de-duplicated": {opts: []cache.Option{cache.WithDedup(true)}, calls: 1},
		"idempotent":    {opts: []cache.Option{cache.WithTTL(0)}, key: "job", calls: 1},
		"alone":         {calls: 2},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, err := cache.New(newSlowStore(t, 2*time.Second), append(tc.opts, cache.WithStoreTimeout(5*time.Second))...)
				require.NoError(t, err)
				p := fake.New(fake.Reply("first"), fake.Reply("second"), fake.Reply("third"))
				cl := client(t, p, c.Middleware())
				mk := noDeadline
				if tc.key != "" {
					mk = withKey(tc.key, 0)
				}
				first := <-callAt(cl, 0, chat("hi"), mk)
				require.NoError(t, first.err)
				assert.Equal(t, time.Duration(0), first.at)

				repeat := <-callAt(cl, time.Second, chat("hi"), mk) // the store ends at 2s
				require.NoError(t, repeat.err)
				assert.Equal(t, time.Second, repeat.at)
				assert.Equal(t, tc.calls, p.Calls())
				if tc.calls == 1 {
					assert.Equal(t, "first", repeat.resp.Text)
					assert.Equal(t, uint64(1), c.Stats().Shared)
					if tc.key != "" {
						s, err := cl.Stream(cache.WithIdempotencyKey(context.Background(), tc.key), chat("hi"))
						require.NoError(t, err)
						chunks, err := readAll(t, s)
						require.NoError(t, err)
						require.Len(t, chunks, 1)
						assert.Equal(t, "first", chunks[0].Text, "a stream under the key too")
					}
				}

				require.NoError(t, c.Flush(context.Background()))
				assert.Equal(t, 0, c.Stats().InFlight)
				later := <-callAt(cl, 0, chat("hi"), mk)
				require.NoError(t, later.err)
				assert.Equal(t, tc.calls, p.Calls(), "served from the store")
				assert.True(t, later.resp.Cached, "a hit, or a replay")
			})
		})
	}
}

// Flush returns at once when nothing is being stored, and ctx's error when ctx ends
// before the stores do.
func TestFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := cache.New(newSlowStore(t, time.Hour), cache.WithStoreTimeout(time.Minute))
		require.NoError(t, err)
		require.NoError(t, c.Flush(context.Background()))
		_, err = client(t, fake.New(fake.Reply("ok")), c.Middleware()).Complete(context.Background(), chat("hi"))
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		assert.ErrorIs(t, c.Flush(ctx), context.DeadlineExceeded)
		start := time.Now()
		require.NoError(t, c.Flush(context.Background()))
		assert.Equal(t, time.Minute-time.Second, time.Since(start))
	})
}
