package otel_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient"
	llmotel "github.com/llmclient/llmclient/otel"
	"github.com/llmclient/llmclient/provider/fake"
)

// llmclient.client.attempts is cumulative across Watch, which forgets the module's
// cached attribute sets: a set's count goes on from where it was.
func TestAttemptsCountAcrossWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		up := func() llmclient.Option {
			return llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Reply("hi").Forever())})
		}
		c := r.client(t, up())
		count := func() int64 {
			got := matching(wrapI(sumI(t, r.collect(t), "llmclient.client.attempts")),
				map[string]any{"llmclient.upstream": "a", "gen_ai.request.model": "m"})
			require.Len(t, got, 1)
			return got[0].Value
		}
		for range 2 {
			_, err := c.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
		}
		assert.Equal(t, int64(2), count())
		_ = r.client(t, up()) // a second Watch
		for range 3 {
			_, err := c.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
		}
		assert.Equal(t, int64(5), count())
		assert.Equal(t, int64(5), count(), "a collection does not change the count")
	})
}

// Beyond 4,096 distinct attribute sets (8 here), attempts are counted under
// otel.metric.overflow=true; none is lost.
func TestAttemptsOverflowSet(t *testing.T) {
	const sets, extra = 8, 7
	llmotel.SetMaxCountedSets(t, sets)
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Reply("hi").Forever())}))
		for i := range sets + extra {
			_, err := c.Complete(context.Background(), chatReq(fmt.Sprintf("m%d", i)))
			require.NoError(t, err)
		}
		_, err := c.Complete(context.Background(), chatReq("m0")) // a counted set stays counted
		require.NoError(t, err)
		points := wrapI(sumI(t, r.collect(t), "llmclient.client.attempts"))
		var total int64
		for _, p := range points {
			total += p.Value
		}
		assert.Equal(t, int64(sets+extra+1), total)
		over := matching(points, map[string]any{"otel.metric.overflow": true})
		require.Len(t, over, 1)
		assert.Equal(t, int64(extra), over[0].Value)
		assert.Len(t, points, sets+1)
		m0 := matching(points, map[string]any{"gen_ai.request.model": "m0"})
		require.Len(t, m0, 1)
		assert.Equal(t, int64(2), m0[0].Value)
	})
}

// Attempts counted from many goroutines while collections run are all counted.
func TestAttemptsCountUnderConcurrency(t *testing.T) {
	r := newRig(t)
	c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Reply("hi").Forever())}))
	const workers, calls = 8, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				_, err := c.Complete(context.Background(), chatReq(fmt.Sprintf("m%d", (w+i)%3)))
				assert.NoError(t, err)
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			_ = r.collect(t)
		}
	})
	wg.Wait()
	var total int64
	for _, p := range sumI(t, r.collect(t), "llmclient.client.attempts") {
		total += p.Value
	}
	assert.Equal(t, int64(workers*calls), total)
}
