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

// thinking is a chunk of reasoning, answer one of content.
func thinking(s string) llmclient.Chunk { return llmclient.Chunk{Reasoning: s} }
func answer(s string) llmclient.Chunk   { return llmclient.Chunk{Text: s} }

// readTimed drains a stream opened on c and returns it, how long the reading took and its
// error.
func readTimed(t *testing.T, c *llmclient.Client, model string) (*llmclient.Response, time.Duration, error) {
	t.Helper()
	s, err := c.Stream(context.Background(), chatReq(model))
	require.NoError(t, err)
	defer s.Close()
	var rerr error
	d := elapsed(func() { _, rerr = readAll(s) })
	return s.Response(), d, rerr
}

// With the default limits, a reasoning model's 90 s pauses — between reasoning deltas and
// before the first content delta after them — are within the reasoning phase's 2 minutes
// and are not cut, although they are longer than the content phase's minute.
func TestReasoningPauseWithinItsLimitIsNotCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.StreamChunks(thinking("let me see"), thinking(" more"), answer("42")).
			StallAfter(1, 90*time.Second).StallAfter(2, 90*time.Second))
		peer := fake.New(fake.Stream("unused").Forever())
		c := newClient(t, up("a", p), up("b", peer))
		resp, d, err := readTimed(t, c, "m")
		require.NoError(t, err)
		assert.Equal(t, 180*time.Second, d)
		assert.Equal(t, "42", resp.Text)
		assert.Equal(t, "let me see more", resp.Reasoning)
		assert.Equal(t, "a", resp.Upstream)
		assert.Equal(t, 0, peer.Calls())
	})
}

// A content stall is cut after the content phase's minute, and a reasoning pause past
// the reasoning phase's 2 minutes is cut too; both continue on the peer.
func TestContentStallAndLongReasoningPauseAreCut(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chunks []llmclient.Chunk
		want   time.Duration
	}{
		{"content stall", []llmclient.Chunk{thinking("hm"), answer("the answer "), answer("is 42")}, time.Minute},
		{"reasoning pause", []llmclient.Chunk{thinking("hm"), thinking(" hm"), answer("the answer is 42")}, 2 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := fake.New(fake.StreamChunks(tc.chunks...).StallAfter(2, time.Hour))
				peer := fake.New(fake.StreamChunks(tc.chunks...))
				c := newClient(t, up("a", p), up("b", peer))
				resp, d, err := readTimed(t, c, "m")
				require.NoError(t, err)
				assert.Equal(t, tc.want, d)
				assert.Equal(t, "the answer is 42", resp.Text)
				require.Len(t, resp.Attempts, 2)
				assert.ErrorIs(t, resp.Attempts[0].Err, llmclient.ErrIdleTimeout)
			})
		})
	}
}

// learnFrom runs n clean streams on c, each of which must succeed on p.
func learnFrom(t *testing.T, c *llmclient.Client, n int) {
	t.Helper()
	for range n {
		resp, _, err := readTimed(t, c, "m")
		require.NoError(t, err)
		require.Equal(t, "p", resp.Upstream)
	}
}

// Without WithIdleTimeout, each phase's idle limit is learned per upstream and model from
// the longest waits of its clean streams — four times their 95th percentile, within the
// phase's bounds — once 20 streams were seen; WithIdleTimeout fixes it.
func TestIdleLimitIsLearned(t *testing.T) {
	peer := func() llmclient.Option { return up("peer", fake.New(fake.Stream("a", "b").Forever())) }
	t.Run("content phase follows the gaps", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// Streams that pause 8 s: 4 × 8.192 s (the top of the sample's bucket).
			p := fake.New(fake.Stream("a", "b").StallAfter(1, 8*time.Second).Times(20),
				fake.Stream("a", "b").StallAfter(1, time.Hour))
			c := newClient(t, up("p", p), peer())
			learnFrom(t, c, 20)
			resp, d, err := readTimed(t, c, "m")
			require.NoError(t, err)
			assert.Equal(t, 32768*time.Millisecond, d, "below the 1m default")
			assert.Equal(t, "peer", resp.Upstream)
			assert.ErrorIs(t, resp.Attempts[0].Err, llmclient.ErrIdleTimeout)
		})
	})
	t.Run("content phase never below its floor", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := fake.New(fake.Stream("a", "b").StallAfter(1, 10*time.Millisecond).Times(20),
				fake.Stream("a", "b").StallAfter(1, 9*time.Second),
				fake.Stream("a", "b").StallAfter(1, time.Hour))
			c := newClient(t, up("p", p), peer())
			learnFrom(t, c, 20)
			learnFrom(t, c, 1) // a 9 s pause is within the 10 s floor
			resp, d, err := readTimed(t, c, "m")
			require.NoError(t, err)
			assert.Equal(t, 10*time.Second, d, "the floor")
			assert.Equal(t, "peer", resp.Upstream)
		})
	})
	t.Run("reasoning phase follows the gaps", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// Reasoning that pauses 20 s before the answer: 4 × 32.768 s, above the 2m default.
			think := func() *fake.StreamStep {
				return fake.StreamChunks(thinking("hm"), answer("a"), answer("b"))
			}
			p := fake.New(think().StallAfter(1, 20*time.Second).Times(20),
				think().StallAfter(1, 130*time.Second),
				think().StallAfter(1, time.Hour))
			c := newClient(t, up("p", p), up("peer", fake.New(think().Forever())))
			learnFrom(t, c, 20)
			learnFrom(t, c, 1) // 130 s: past the default, within the learned limit
			resp, d, err := readTimed(t, c, "m")
			require.NoError(t, err)
			assert.Equal(t, 131072*time.Millisecond, d)
			assert.Equal(t, "peer", resp.Upstream)
		})
	})
	t.Run("reasoning phase never below its floor", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			think := func() *fake.StreamStep {
				return fake.StreamChunks(thinking("hm"), answer("a"), answer("b"))
			}
			// Short pauses in both phases: the content limit learned at its floor (10 s), the
			// reasoning one at its own (30 s), which a reasoning pause gets.
			p := fake.New(think().StallAfter(1, 10*time.Millisecond).StallAfter(2, 10*time.Millisecond).Times(20),
				think().StallAfter(1, time.Hour))
			c := newClient(t, up("p", p), up("peer", fake.New(think().Forever())))
			learnFrom(t, c, 20)
			_, d, err := readTimed(t, c, "m")
			require.NoError(t, err)
			assert.Equal(t, 30*time.Second, d, "the reasoning floor")
		})
	})
	t.Run("another model keeps the default", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := fake.New(fake.Stream("a", "b").StallAfter(1, 10*time.Millisecond).Times(20),
				fake.Stream("a", "b").StallAfter(1, time.Hour))
			c := newClient(t, up("p", p), peer())
			learnFrom(t, c, 20)
			s, err := c.Stream(context.Background(), chatReq("other"))
			require.NoError(t, err)
			defer s.Close()
			d := elapsed(func() { _, err = readAll(s) })
			require.NoError(t, err)
			assert.Equal(t, time.Minute, d)
		})
	})
	t.Run("WithIdleTimeout fixes it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := fake.New(fake.Stream("a", "b").StallAfter(1, 10*time.Millisecond).Times(20),
				fake.Stream("a", "b").StallAfter(1, 40*time.Second),
				fake.Stream("a", "b").StallAfter(1, time.Hour))
			c := newClient(t, up("p", p), peer(), llmclient.WithIdleTimeout(45*time.Second))
			learnFrom(t, c, 20)
			learnFrom(t, c, 1) // learned, 10 s would cut it
			resp, d, err := readTimed(t, c, "m")
			require.NoError(t, err)
			assert.Equal(t, 45*time.Second, d)
			assert.Equal(t, "peer", resp.Upstream)
		})
	})
}
