package llmclient_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A stream the caller holds without reading is still timed by its idle timeout: an
// upstream that stalls is cut and every lease comes back (the concurrency slot, the
// key's in-flight count, the half-open probe) without the caller.
func TestIdleTimeoutFiresWhileTheCallerDoesNotRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Fail(500), fake.Stream("a", "b", "c").StallAfter(1, time.Hour), fake.Reply("ok").Forever())
		c := newClient(t,
			llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: []string{"k1"},
				Limits: llmclient.Limits{MaxConcurrent: 1}}),
			llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, HalfOpenProbes: 1}),
			llmclient.WithIdleTimeout(5*time.Second), llmclient.WithMaxAttempts(1), llmclient.WithStreamContinuation(false))
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.Error(t, err) // the breaker opens
		time.Sleep(time.Second)
		s, err := c.Stream(context.Background(), chatReq("m")) // the half-open probe
		require.NoError(t, err)
		defer s.Close()
		require.True(t, s.Next())
		assert.Equal(t, 1, c.InFlight("a"))
		time.Sleep(11 * time.Second) // the caller holds the stream and does not read
		synctest.Wait()
		assert.Equal(t, 0, c.InFlight("a"), "the slot came back without the caller")
		time.Sleep(time.Minute) // the probe failed: the breaker opened, then half-opens again
		resp, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err, "the probe slot came back")
		assert.Equal(t, "ok", resp.Text)
		assert.False(t, s.Next())
		assert.ErrorIs(t, s.Err(), llmclient.ErrIdleTimeout)
		assert.Equal(t, "a", s.Response().Text)
	})
}

// A healthy stream that ends while its caller is away settles at once: its slot comes
// back, and the caller later reads the whole answer, a success.
func TestStreamEndingWhileTheCallerIsAwaySettlesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Stream("a", "b", "c").ChunkDelay(time.Second).Usage(5, 3))
		var log eventLog
		c := newClient(t,
			llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: []string{"k1"},
				Limits: llmclient.Limits{MaxConcurrent: 1}}),
			llmclient.WithIdleTimeout(5*time.Second), llmclient.WithObserver(log.observe))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		require.True(t, s.Next())
		time.Sleep(9 * time.Second)
		synctest.Wait()
		assert.Equal(t, 0, c.InFlight("a"), "the upstream finished: the slot came back")
		text := s.Current().Text
		for s.Next() {
			text += s.Current().Text
		}
		require.NoError(t, s.Err())
		assert.Equal(t, "abc", text)
		assert.Equal(t, 3, s.Response().Usage.OutputTokens)
		at := log.kinds(event.Attempt)
		require.Len(t, at, 1)
		assert.Equal(t, failure.None, at[0].Class)
		assert.Len(t, log.kinds(event.Call), 1)
	})
}

// A caller that leaves the read-ahead buffer full and unread for an idle period ends the
// stream: a stuck consumer does not hold a healthy upstream's slot for ever, and memory
// stays bounded.
func TestStuckConsumerEndsAfterAFullBuffer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		texts := make([]string, 6000)
		for i := range texts {
			texts[i] = "x"
		}
		p := fake.New(fake.Stream(texts...))
		c := newClient(t,
			llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Limits: llmclient.Limits{MaxConcurrent: 1}}),
			llmclient.WithIdleTimeout(5*time.Second), llmclient.WithStreamContinuation(false))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		require.True(t, s.Next())
		time.Sleep(11 * time.Second)
		synctest.Wait()
		assert.Equal(t, 0, c.InFlight("a"))
		n := 1
		for s.Next() {
			n++
		}
		assert.ErrorIs(t, s.Err(), llmclient.ErrIdleTimeout)
		assert.Less(t, n, len(texts))
	})
}

// openCounter wraps a provider and counts the streams open upstream at once.
type openCounter struct {
	llmclient.Provider
	open, peak atomic.Int64
}

func (o *openCounter) Stream(ctx context.Context, call *llmclient.Call) (llmclient.ProviderStream, error) {
	n := o.open.Add(1)
	for {
		p := o.peak.Load()
		if n <= p || o.peak.CompareAndSwap(p, n) {
			break
		}
	}
	ps, err := o.Provider.Stream(ctx, call)
	if err != nil {
		o.open.Add(-1)
		return nil, err
	}
	return &countedStream{ProviderStream: ps, o: o}, nil
}

type countedStream struct {
	llmclient.ProviderStream
	o    *openCounter
	once sync.Once
}

func (s *countedStream) Close() error {
	err := s.ProviderStream.Close()
	s.once.Do(func() {
		time.Sleep(time.Millisecond) // closing a connection takes a moment
		s.o.open.Add(-1)
	})
	return err
}

// Closing a stream ends its upstream request before its concurrency slot is given back:
// the key never has more requests open upstream than its MaxConcurrent.
func TestStreamCloseEndsTheUpstreamBeforeTheSlotComesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &openCounter{Provider: fake.New(fake.Stream("a", "b", "c").ChunkDelay(time.Second).Forever())}
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: o,
			Limits: llmclient.Limits{MaxConcurrent: 2}}))
		var wg sync.WaitGroup
		for i := 0; i < 6; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := c.Stream(context.Background(), chatReq("m"))
				if !assert.NoError(t, err) {
					return
				}
				var b strings.Builder
				for s.Next() {
					b.WriteString(s.Current().Text)
					if b.Len() == 2 {
						break
					}
				}
				_ = s.Close()
			}()
		}
		wg.Wait()
		assert.LessOrEqual(t, o.peak.Load(), int64(2))
	})
}
