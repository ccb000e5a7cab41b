package cache_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Under many goroutines (run with -race), the counters add up: every call is one lookup,
// a hit or a miss; every miss either made the upstream call or shared one; every upstream
// call's answer was stored once. Stats read meanwhile never go backwards.
func TestStatsAddUpUnderConcurrency(t *testing.T) {
	c, m := newCache(t, cache.WithDedup(true))
	p := fake.New(fake.Reply("x").Forever())
	cl := client(t, p, c.Middleware())
	const goroutines, calls, questions = 8, 40, 5
	stop := make(chan struct{})
	var reader sync.WaitGroup
	reader.Add(1)
	go func() {
		defer reader.Done()
		var last cache.Stats
		for {
			select {
			case <-stop:
				return
			default:
			}
			s := c.Stats()
			assert.GreaterOrEqual(t, s.Hits, last.Hits)
			assert.GreaterOrEqual(t, s.Misses, last.Misses)
			assert.GreaterOrEqual(t, s.Stored, last.Stored)
			assert.True(t, s.HitRate() >= 0 && s.HitRate() <= 1)
			_ = c.Health()
			last = s
		}
	}()
	concurrently(goroutines, calls, func(g, i int) {
		r, err := cl.Complete(context.Background(), chat("q"+strconv.Itoa((g+i)%questions)))
		if assert.NoError(t, err) {
			assert.Equal(t, "x", r.Text)
		}
	})
	close(stop)
	reader.Wait()
	s := c.Stats()
	require.Equal(t, uint64(goroutines*calls), s.Hits+s.Misses, "one lookup per call")
	assert.Equal(t, uint64(p.Calls())+s.Shared, s.Misses, "a miss calls the upstream or shares a call")
	assert.Equal(t, uint64(p.Calls()), s.Stored, "every upstream answer stored once")
	assert.Equal(t, int64(questions), m.StoreStats().Entries)
	assert.Equal(t, int64(questions), s.Store.Entries)
	assert.Equal(t, 0, s.InFlight)
}
