package llmclient_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readAll drains a stream and returns its text and error.
func readAll(s *llmclient.Stream) (string, error) {
	var b strings.Builder
	for s.Next() {
		b.WriteString(s.Current().Text)
	}
	return b.String(), s.Err()
}

func TestStreamCleanEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Stream("Hel", "lo").ChunkDelay(100*time.Millisecond).Usage(7, 2))
		c := newClient(t, up("a", p))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		text, err := readAll(s)
		require.NoError(t, err)
		assert.Equal(t, "Hello", text)
		resp := s.Response()
		assert.Equal(t, "Hello", resp.Text)
		assert.Equal(t, finish.Stop, resp.FinishReason)
		assert.Equal(t, 7, resp.Usage.InputTokens)
		assert.Equal(t, "a", resp.Upstream)
		require.Len(t, resp.Attempts, 1)
		assert.Equal(t, 0, c.InFlight("a"))
	})
}

func TestStreamStallBeforeFirstTokenFailsOverInvisibly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Stream("never").StallFirst(10 * time.Minute).Forever())
		b := fake.New(fake.Stream("from ", "b"))
		c := newClient(t, up("a", a), up("b", b), llmclient.WithFirstTokenTimeout(20*time.Second),
			llmclient.WithMaxAttempts(1))
		var s *llmclient.Stream
		var err error
		d := elapsed(func() { s, err = c.Stream(context.Background(), chatReq("m")) })
		require.NoError(t, err)
		defer s.Close()
		assert.Equal(t, 20*time.Second, d)
		text, err := readAll(s)
		require.NoError(t, err)
		assert.Equal(t, "from b", text)
		resp := s.Response()
		assert.Equal(t, []string{"a", "b"}, upstreamsOf(resp.Attempts))
		assert.Equal(t, failure.Timeout, resp.Attempts[0].Class)
		assert.ErrorIs(t, resp.Attempts[0].Err, llmclient.ErrFirstTokenTimeout)
		assert.True(t, resp.Fallback)
	})
}

func TestStreamInBandErrorBeforeFirstTokenIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(
			fake.Stream("x").FailAfter(0, fake.Fail(529).Type("overloaded_error")),
			fake.Stream("ok"),
		)
		c := newClient(t, up("a", p))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		text, err := readAll(s)
		require.NoError(t, err)
		assert.Equal(t, "ok", text)
		attempts := s.Response().Attempts
		require.Len(t, attempts, 2)
		assert.Equal(t, failure.Overloaded, attempts[0].Class)
	})
}

func TestStreamCutAfterKChunksIsInterruptedWithPartial(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Stream("one ", "two ", "three ", "four").CutAfter(2), fake.Stream("never"))
		c := newClient(t, up("a", p), llmclient.WithStreamContinuation(false))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		text, err := readAll(s)
		assert.Equal(t, "one two ", text)
		require.Error(t, err)
		assert.Equal(t, failure.StreamInterrupted, llmclient.ClassOf(err))
		assert.ErrorIs(t, err, llmclient.ErrStreamInterrupted)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
		var e *llmclient.Error
		require.ErrorAs(t, err, &e)
		require.NotNil(t, e.Partial)
		assert.Equal(t, "one two ", e.Partial.Text)
		assert.Equal(t, "a", e.Upstream)
		assert.Equal(t, 1, p.Calls(), "without continuation a stream is never restarted after its first token")

		cont := llmclient.ContinuationRequest(chatReq("m"), err)
		require.NotNil(t, cont)
		last := cont.Messages[len(cont.Messages)-1]
		assert.Equal(t, llmclient.RoleAssistant, last.Role)
		assert.Equal(t, "one two ", last.Text())
	})
}

func TestStreamIdleGapIsInterrupted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Stream("a", "b", "c").StallAfter(1, 5*time.Minute).KeepAlive(5 * time.Second))
		c := newClient(t, up("a", p), llmclient.WithIdleTimeout(30*time.Second), llmclient.WithStreamContinuation(false))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		var text string
		d := elapsed(func() { text, err = readAll(s) })
		assert.Equal(t, "a", text)
		assert.Equal(t, failure.StreamInterrupted, llmclient.ClassOf(err))
		assert.ErrorIs(t, err, llmclient.ErrIdleTimeout)
		assert.Equal(t, 30*time.Second, d, "keep-alives do not reset the idle timer by default")
	})
}

func TestStreamKeepAlivesDoNotSatisfyFirstTokenTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Stream("late").StallFirst(60 * time.Second).KeepAlive(5 * time.Second).Forever())
		c := newClient(t, up("a", p), llmclient.WithFirstTokenTimeout(20*time.Second), llmclient.WithMaxAttempts(2))
		var err error
		d := elapsed(func() { _, err = c.Stream(context.Background(), chatReq("m")) })
		assert.Equal(t, failure.Timeout, llmclient.ClassOf(err))
		assert.ErrorIs(t, err, llmclient.ErrFirstTokenTimeout)
		assert.Equal(t, 2, p.Calls())
		// Two 20s first-token timeouts, and no backoff between them: a stall is not overload.
		assert.Equal(t, 40*time.Second, d)
	})
}

func TestStreamCloseEarlyReleasesSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Stream("a", "b", "c", "d").ChunkDelay(time.Second).Times(2))
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p,
			Limits: llmclient.Limits{MaxConcurrent: 1}}))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		require.True(t, s.Next())
		assert.Equal(t, 1, c.InFlight("a"))
		require.NoError(t, s.Close())
		require.NoError(t, s.Close(), "Close is idempotent")
		assert.Equal(t, 0, c.InFlight("a"))
		assert.False(t, s.Next())

		// The concurrency slot is free: a second stream starts at once.
		var s2 *llmclient.Stream
		d := elapsed(func() { s2, err = c.Stream(context.Background(), chatReq("m")) })
		require.NoError(t, err)
		assert.Zero(t, d)
		require.NoError(t, s2.Close())
		synctest.Wait()
	})
}

func TestStreamContextCancelMidStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Stream("a", "b").StallAfter(1, time.Hour))
		c := newClient(t, up("a", p), llmclient.WithIdleTimeout(0))
		ctx, cancel := context.WithCancel(context.Background())
		s, err := c.Stream(ctx, chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		require.True(t, s.Next())
		time.AfterFunc(3*time.Second, cancel)
		var more bool
		d := elapsed(func() { more = s.Next() })
		assert.False(t, more)
		assert.Equal(t, 3*time.Second, d)
		assert.Equal(t, failure.Canceled, llmclient.ClassOf(s.Err()))
		var e *llmclient.Error
		require.ErrorAs(t, s.Err(), &e)
		assert.Equal(t, "a", e.Partial.Text)
	})
}

func TestStreamIteratorForm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Stream("x", "y", "z").CutAfter(2))
		c := newClient(t, up("a", p), llmclient.WithStreamContinuation(false))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		var got []string
		var last error
		for ch, err := range s.All() {
			if err != nil {
				last = err
				break
			}
			got = append(got, ch.Text)
		}
		assert.Equal(t, []string{"x", "y"}, got)
		assert.Equal(t, failure.StreamInterrupted, llmclient.ClassOf(last))
	})
}

func TestStreamEmptyOutputIsClassified(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.StreamChunks(llmclient.Chunk{Reasoning: "thinking..."}).Finish(finish.Length))
		c := newClient(t, up("a", p))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		_, err = readAll(s)
		assert.Equal(t, failure.EmptyOutput, llmclient.ClassOf(err))
	})
}
