package cache_test

import (
	"context"
	"sync"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/cache"
	"github.com/stretchr/testify/require"
)

func chat(text string) *llmclient.Request {
	return &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage(text)}}
}

// client builds a Client with the middleware over one upstream served by p.
func client(t testing.TB, p llmclient.Provider, mw llmclient.Middleware, opts ...llmclient.Option) *llmclient.Client {
	t.Helper()
	opts = append(opts, llmclient.WithMiddleware(mw), llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p}))
	c, err := llmclient.New(opts...)
	require.NoError(t, err)
	return c
}

func newCache(t testing.TB, opts ...cache.Option) (*cache.Cache, *cache.Memory) {
	t.Helper()
	m, err := cache.NewMemory(cache.MemoryConfig{})
	require.NoError(t, err)
	c, err := cache.New(m, opts...)
	require.NoError(t, err)
	return c, m
}

// events records a cache's events.
type events struct {
	mu  sync.Mutex
	all []cache.Event
}

func (e *events) observe(_ context.Context, ev cache.Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

func (e *events) kinds() []cache.EventKind {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]cache.EventKind, len(e.all))
	for i, ev := range e.all {
		out[i] = ev.Kind
	}
	return out
}

func (e *events) of(k cache.EventKind) []cache.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []cache.Event
	for _, ev := range e.all {
		if ev.Kind == k {
			out = append(out, ev)
		}
	}
	return out
}

func (e *events) reset() {
	e.mu.Lock()
	e.all = nil
	e.mu.Unlock()
}

// readAll reads a stream to its end and closes it.
func readAll(t testing.TB, s *llmclient.Stream) ([]llmclient.Chunk, error) {
	t.Helper()
	var out []llmclient.Chunk
	for s.Next() {
		out = append(out, s.Current())
	}
	err := s.Err()
	s.Close()
	return out, err
}

// concurrently runs f(g, i) for i in [0, calls) on each of goroutines goroutines, and
// waits for them all.
func concurrently(goroutines, calls int, f func(g, i int)) {
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				f(g, i)
			}
		}()
	}
	wg.Wait()
}
