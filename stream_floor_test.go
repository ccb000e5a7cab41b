package llmclient_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// words returns n chunks of 4 bytes: one estimated token each.
func words(n int, w string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = w
	}
	return out
}

// A stream slower than the floor (1 token/s against 5 over 2 s) is failed over when the
// window passes, before its caller sees any of it: the caller reads the fallback's answer
// alone, the attempt shows the cut (class timeout, ErrThroughputFloor) in the trace and the
// events, and the breaker counts it slow, not failed.
func TestThroughputFloorFailsOverASlowStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := fake.New(fake.Stream(words(10, "slow")...).ChunkDelay(time.Second))
		fast := fake.New(fake.Stream(words(10, "fast")...))
		var log eventLog
		c := newClient(t, up("a", slow), up("b", fast), llmclient.WithThroughputFloor(5, 2*time.Second),
			llmclient.WithObserver(log.observe))
		var s *llmclient.Stream
		var err error
		d := elapsed(func() { s, err = c.Stream(context.Background(), chatReq("m")) })
		require.NoError(t, err)
		defer s.Close()
		assert.Equal(t, 2*time.Second, d, "cut when the window passed")
		text, err := readAll(s)
		require.NoError(t, err)
		assert.Equal(t, strings.Repeat("fast", 10), text, "nothing of the slow stream reaches the caller")
		resp := s.Response()
		assert.Equal(t, "b", resp.Upstream)
		require.Len(t, resp.Attempts, 2)
		assert.Equal(t, failure.Timeout, resp.Attempts[0].Class)
		assert.ErrorIs(t, resp.Attempts[0].Err, llmclient.ErrThroughputFloor)
		attempts := log.kinds(event.Attempt)
		require.NotEmpty(t, attempts)
		assert.ErrorIs(t, attempts[0].Err, llmclient.ErrThroughputFloor)
		require.Len(t, log.kinds(event.Failover), 1)
		snap := c.Breaker("a").Snapshot()
		assert.Equal(t, 0, snap.Failures)
		assert.Equal(t, 1, snap.Slow)
		assert.Equal(t, 0, c.InFlight("a")+c.InFlight("b"))
	})
}

// A stream that meets the floor is held back until it has produced the floor's tokens
// (5/s over 2 s: 10 tokens, the 10th chunk at 900 ms at 10 tokens/s), then delivered
// whole: the floor's price is that delay before the first chunk, never more than the
// window.
func TestThroughputFloorHoldsUntilMet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Stream(words(20, "tick")...).ChunkDelay(100 * time.Millisecond))
		c := newClient(t, up("a", p), up("b", fake.New(fake.Stream("unused"))), llmclient.WithThroughputFloor(5, 2*time.Second))
		start := time.Now()
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		require.True(t, s.Next())
		assert.Equal(t, 900*time.Millisecond, time.Since(start), "the first chunk waits for the 10th token")
		text := s.Current().Text
		for s.Next() {
			text += s.Current().Text
		}
		require.NoError(t, s.Err())
		assert.Equal(t, strings.Repeat("tick", 20), text)
		assert.Equal(t, "a", s.Response().Upstream)
		require.Len(t, s.Response().Attempts, 1)
	})
}

// A short answer that ends within the window is not cut, however few its tokens.
func TestThroughputFloorKeepsAShortAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Stream("Hi", "!").ChunkDelay(500 * time.Millisecond))
		c := newClient(t, up("a", p), up("b", fake.New(fake.Stream("unused"))), llmclient.WithThroughputFloor(50, 2*time.Second))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		text, err := readAll(s)
		require.NoError(t, err)
		assert.Equal(t, "Hi!", text)
		assert.Equal(t, "a", s.Response().Upstream)
	})
}

// On the last upstream of its route a stream has nowhere to go: the floor does not hold
// it, and its first chunk comes at once.
func TestThroughputFloorSparesTheLastUpstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Stream(words(4, "slow")...).ChunkDelay(time.Second))
		c := newClient(t, up("a", p), llmclient.WithThroughputFloor(5, 2*time.Second))
		start := time.Now()
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		require.True(t, s.Next())
		assert.Equal(t, time.Duration(0), time.Since(start))
		for s.Next() {
		}
		require.NoError(t, s.Err())
		assert.Equal(t, strings.Repeat("slow", 4), s.Response().Text)
	})
}

// The floor's failover goes through the call's caps: with one attempt allowed, the cut is
// the call's end, before commit (no stream).
func TestThroughputFloorWithinTheAttemptCaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := fake.New(fake.Stream(words(10, "slow")...).ChunkDelay(time.Second))
		fast := fake.New(fake.Stream("fast"))
		c := newClient(t, up("a", slow), up("b", fast), llmclient.WithThroughputFloor(5, 2*time.Second),
			llmclient.WithMaxTotalAttempts(1))
		s, err := c.Stream(context.Background(), chatReq("m"))
		if err == nil {
			defer s.Close()
			_, err = readAll(s)
		}
		// With one attempt the call has nowhere else to go: the floor does not apply.
		require.NoError(t, err)
		assert.Equal(t, 0, fast.Calls())
	})
}

// WithThroughputFloor's inputs: NaN, infinities, negative or huge rates, negative or
// over-long windows and half-set pairs are refused by New; 0, 0 is off.
func TestThroughputFloorValidation(t *testing.T) {
	p := fake.New(fake.Stream("x"))
	for _, tc := range []struct {
		rate float64
		over time.Duration
		ok   bool
	}{
		{0, 0, true},
		{0.5, time.Second, true},
		{100_000, 2 * time.Minute, true},
		{-1, time.Second, false},
		{math.NaN(), time.Second, false},
		{math.Inf(1), time.Second, false},
		{math.Inf(-1), time.Second, false},
		{100_001, time.Second, false},
		{math.MaxFloat64, time.Second, false},
		{10, -time.Second, false},
		{10, 2*time.Minute + 1, false},
		{10, time.Duration(math.MaxInt64), false},
		{10, 0, false},
		{0, time.Second, false},
	} {
		_, err := llmclient.New(up("a", p), llmclient.WithThroughputFloor(tc.rate, tc.over))
		if tc.ok {
			assert.NoError(t, err, "%v over %v", tc.rate, tc.over)
		} else {
			assert.ErrorContains(t, err, "WithThroughputFloor", "%v over %v", tc.rate, tc.over)
		}
	}
}
