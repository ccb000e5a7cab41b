package llmclient_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A middleware can record a stream with Tap and replay it with StreamOf: the replay
// delivers the same chunks, in order, and the same response.
func TestStreamTapAndReplay(t *testing.T) {
	p := fake.New(fake.Stream("Hel", "lo", " world").Usage(7, 3))
	c := newClient(t, up("a", p))
	s, err := c.Stream(context.Background(), chatReq("m"))
	require.NoError(t, err)
	var recorded []llmclient.Chunk
	var final *llmclient.Response
	var ends int
	s.Tap(func(ch llmclient.Chunk) { recorded = append(recorded, ch) },
		func(resp *llmclient.Response, err error) { final, ends = resp, ends+1; require.NoError(t, err) })
	var live []llmclient.Chunk
	for s.Next() {
		live = append(live, s.Current())
	}
	require.NoError(t, s.Err())
	require.NoError(t, s.Close())
	assert.Equal(t, live, recorded)
	assert.Equal(t, 1, ends, "end is called once, not again at Close")
	require.NotNil(t, final)
	assert.Equal(t, "Hello world", final.Text)

	replay := llmclient.StreamOf(recorded, final)
	var again []llmclient.Chunk
	for replay.Next() {
		again = append(again, replay.Current())
	}
	require.NoError(t, replay.Err())
	assert.Equal(t, recorded, again, "chunk by chunk")
	assert.Equal(t, final, replay.Response())

	// Closed before its end: the taps hear of it from Close.
	p2 := fake.New(fake.Stream("a", "b", "c"))
	c2 := newClient(t, up("a", p2))
	s2, err := c2.Stream(context.Background(), chatReq("m"))
	require.NoError(t, err)
	var endErr error
	s2.Tap(nil, func(_ *llmclient.Response, err error) { endErr = err })
	require.True(t, s2.Next())
	require.NoError(t, s2.Close())
	assert.ErrorIs(t, endErr, context.Canceled)
}

// A Close from another goroutine while the reader waits in Next tells the taps the stream
// was canceled, never a clean end with the partial response (a cache would store it).
func TestStreamTapCloseWhileReading(t *testing.T) {
	for range 200 {
		synctest.Test(t, func(t *testing.T) {
			p := fake.New(fake.Stream("a", "b", "c", "d").ChunkDelay(time.Second))
			c := newClient(t, up("a", p))
			s, err := c.Stream(context.Background(), chatReq("m"))
			require.NoError(t, err)
			var ends []error
			var resps []*llmclient.Response
			first := make(chan struct{}, 1)
			s.Tap(func(llmclient.Chunk) {
				select {
				case first <- struct{}{}:
				default:
				}
			}, func(r *llmclient.Response, err error) {
				ends, resps = append(ends, err), append(resps, r)
			})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for s.Next() {
				}
			}()
			<-first
			require.NoError(t, s.Close())
			<-done
			require.Len(t, ends, 1)
			assert.ErrorIs(t, ends[0], context.Canceled)
			assert.Nil(t, resps[0])
		})
	}
}
