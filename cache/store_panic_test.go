package cache_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// panickyStore is a store (one that may block: not a Memory) whose writes panic with a
// value that holds the entry's text, as a buggy store's panic message might.
type panickyStore struct{ m *cache.Memory }

func (s panickyStore) Get(ctx context.Context, key string) (*cache.Entry, error) {
	return s.m.Get(ctx, key)
}

func (s panickyStore) Set(_ context.Context, _ string, e *cache.Entry, _ time.Duration) error {
	panic("store bug while writing " + e.Response.Text)
}

// The store of an answer runs behind its call, on a goroutine no caller waits for: a
// panic of the store or of the observer there used to end the whole program. It is
// recovered, counted as a store error and reported as EventStoreError with ErrStorePanic,
// naming neither the prompt nor the answer; Flush returns, and the cache keeps serving.
func TestPanicInStoreBehindTheCall(t *testing.T) {
	const prompt, answer = "secret prompt 7f3a", "secret answer 9c1d"
	for name, tc := range map[string]struct {
		opts     []cache.Option
		key      string // idempotency key
		stream   bool
		observer bool // the observer panics on EventStored; else the store panics
	}{
		"complete":            {},
		"shared complete":     {opts: []cache.Option{cache.WithDedup(true)}},
		"idempotent":          {key: "job"},
		"stream":              {stream: true},
		"observer":            {observer: true},
		"observer, shared":    {observer: true, opts: []cache.Option{cache.WithDedup(true)}},
		"observer, streaming": {observer: true, stream: true},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var ev events
				observe := ev.observe
				var store cache.Store = panickyStore{m: memory(t)}
				if tc.observer {
					store = newSlowStore(t, time.Millisecond)
					observe = func(ctx context.Context, e cache.Event) {
						ev.observe(ctx, e)
						if e.Kind == cache.EventStored {
							panic("observer bug on " + answer)
						}
					}
				}
				opts := append([]cache.Option{cache.WithStoreTimeout(5 * time.Second), cache.WithObserver(observe)}, tc.opts...)
				c, err := cache.New(store, opts...)
				require.NoError(t, err)
				var reply fake.Step = fake.Reply(answer).Forever()
				if tc.stream {
					reply = fake.Stream("secret ", "answer 9c1d").Forever()
				}
				cl := client(t, fake.New(reply), c.Middleware())
				ctx := context.Background()
				if tc.key != "" {
					ctx = cache.WithIdempotencyKey(ctx, tc.key)
				}
				call := func() {
					if tc.stream {
						s, err := cl.Stream(ctx, chat(prompt))
						require.NoError(t, err)
						chunks, err := readAll(t, s)
						require.NoError(t, err)
						require.NotEmpty(t, chunks)
						return
					}
					r, err := cl.Complete(ctx, chat(prompt))
					require.NoError(t, err)
					assert.Equal(t, answer, r.Text)
				}
				call()
				fctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				require.NoError(t, c.Flush(fctx), "Flush after a panic in a store behind a call")
				assert.Equal(t, 0, c.Stats().InFlight)

				errs := ev.of(cache.EventStoreError)
				require.Len(t, errs, 1, "the panic is reported")
				assert.ErrorIs(t, errs[0].Err, cache.ErrStorePanic)
				for _, secret := range []string{prompt, answer, "secret", "9c1d", "7f3a"} {
					assert.NotContains(t, errs[0].Err.Error(), secret)
				}
				assert.Equal(t, uint64(1), c.Stats().StoreErrors)

				// The cache goes on: the next call is served; from the cache when the store
				// took the answer before the observer panicked, else stored and reported again.
				call()
				require.NoError(t, c.Flush(fctx))
				if tc.observer {
					assert.Len(t, ev.of(cache.EventHit), 1, "served from the store")
				} else {
					assert.Len(t, ev.of(cache.EventStoreError), 2)
				}
			})
		})
	}
}

// An observer that panics on the report of the panic too does not end the program
// either: Stats still counts the failed store.
func TestPanicInObserverReportingAStorePanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := cache.New(panickyStore{m: memory(t)}, cache.WithStoreTimeout(time.Second),
			cache.WithObserver(func(_ context.Context, e cache.Event) {
				if e.Kind == cache.EventStoreError {
					panic("observer bug")
				}
				if e.Kind == cache.EventStoreError && !errors.Is(e.Err, cache.ErrStorePanic) {
					t.Errorf("store error %v, want ErrStorePanic", e.Err)
				}
			}))
		require.NoError(t, err)
		r, err := client(t, fake.New(fake.Reply("ok")), c.Middleware()).Complete(context.Background(), chat("hi"))
		require.NoError(t, err)
		assert.Equal(t, "ok", r.Text)
		require.NoError(t, c.Flush(context.Background()))
		assert.Equal(t, uint64(1), c.Stats().StoreErrors)
	})
}

func memory(t *testing.T) *cache.Memory {
	m, err := cache.NewMemory(cache.MemoryConfig{})
	require.NoError(t, err)
	return m
}
