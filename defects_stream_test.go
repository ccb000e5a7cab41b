package llmclient_test

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Stream edge cases, through the public API: Client.Stream and the transport's
// body share one committed-attempt type.

// The idle timeout counts only the waits on the upstream, never the consumer's
// own time; a slow reader is neither cut nor counted against the breaker.
func TestDefect05SlowReaderIsNotIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Stream("a", "b", "c", "d").ChunkDelay(time.Second))
		var log eventLog
		c := newClient(t, up("a", p), llmclient.WithIdleTimeout(5*time.Second), llmclient.WithObserver(log.observe))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		var text strings.Builder
		for s.Next() {
			text.WriteString(s.Current().Text)
			time.Sleep(10 * time.Second) // the consumer's own work
		}
		require.NoError(t, s.Err())
		assert.Equal(t, "abcd", text.String())
		assert.Equal(t, 0, c.Breaker("a").Snapshot().Failures)
		at := log.kinds(event.Attempt)
		require.Len(t, at, 1)
		assert.Equal(t, failure.None, at[0].Class)
	})
}

// Close after the finish chunk keeps the usage already received, and Err after
// the caller's own Close is nil.
func TestDefect06CloseKeepsUsageAndIsNotAnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Stream("a", "b").Usage(40, 2))
		var log eventLog
		c := newClient(t, up("a", p), llmclient.WithObserver(log.observe),
			llmclient.WithStreamTimeout(time.Hour))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		for s.Next() {
			if s.Current().FinishReason != finish.None {
				break // the finish chunk, with the usage: stop reading here
			}
		}
		require.NoError(t, s.Close())
		assert.False(t, s.Next())
		assert.NoError(t, s.Err(), "the caller's own Close is not an error")
		at := log.kinds(event.Attempt)
		require.Len(t, at, 1)
		assert.Equal(t, failure.None, at[0].Class, "closed after its finish reason: a success")
		assert.Equal(t, 40, at[0].InputTokens, "the usage received before Close is kept")
		assert.Equal(t, 2, at[0].OutputTokens)
	})
}

// Closing a stream before its end is canceled by the caller: not an error to the caller,
// not a failure of the upstream.
func TestCloseBeforeTheEndIsCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Stream("a", "b", "c").ChunkDelay(time.Second))
		var log eventLog
		c := newClient(t, up("a", p), llmclient.WithObserver(log.observe))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		require.True(t, s.Next())
		require.NoError(t, s.Close())
		assert.False(t, s.Next())
		assert.NoError(t, s.Err())
		at := log.kinds(event.Attempt)
		require.Len(t, at, 1)
		assert.Equal(t, failure.Canceled, at[0].Class)
		assert.Equal(t, 0, c.Breaker("a").Snapshot().Failures)
		assert.Equal(t, 0, c.InFlight("a"))
	})
}

// A stream the caller neither reads nor closes gives back its concurrency slot
// and its half-open probe when its total timeout fires; a stream dropped without Close
// gives them back once it is unreachable.
func TestDefect07AbandonedStreamGivesEverythingBack(t *testing.T) {
	t.Run("stream timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := fake.New(fake.Fail(500), fake.Stream("a", "b", "c").ChunkDelay(time.Minute), fake.Reply("ok").Forever())
			c := newClient(t,
				llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Limits: llmclient.Limits{MaxConcurrent: 1}}),
				llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, HalfOpenProbes: 1}),
				llmclient.WithStreamTimeout(5*time.Second), llmclient.WithMaxAttempts(1))
			_, err := c.Complete(context.Background(), chatReq("m"))
			require.Error(t, err) // the breaker opens
			time.Sleep(time.Second)
			s, err := c.Stream(context.Background(), chatReq("m")) // the half-open probe
			require.NoError(t, err)
			require.True(t, s.Next())
			assert.Equal(t, 1, c.InFlight("a"))
			time.Sleep(6 * time.Second) // the caller forgot the stream; its timeout fires
			synctest.Wait()
			assert.Equal(t, 0, c.InFlight("a"), "the slot came back without the caller")
			time.Sleep(time.Minute) // the probe failed: the breaker opened again, then half-opens
			resp, err := c.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err, "the breaker is not wedged half-open")
			assert.Equal(t, "ok", resp.Text)
			_ = s.Close()
		})
	})
	t.Run("unreachable", func(t *testing.T) {
		p := fake.New(fake.Stream("a", "b").ChunkDelay(time.Hour))
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p,
			Limits: llmclient.Limits{MaxConcurrent: 1}}))
		func() {
			s, err := c.Stream(context.Background(), chatReq("m"))
			require.NoError(t, err)
			require.True(t, s.Next())
		}()
		require.Equal(t, 1, c.InFlight("a"))
		for i := 0; i < 200 && c.InFlight("a") != 0; i++ {
			runtime.GC()
			time.Sleep(5 * time.Millisecond) // let the cleanup goroutine run
		}
		assert.Equal(t, 0, c.InFlight("a"), "a dropped stream gives its slot back")
	})
}

// A transport body closed after the stream's end marker, as openai-go does at
// [DONE], is a success, even when the end arrived in the same read as the last chunk.
func TestDefect08BodyClosedAfterEndMarkerIsSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(sseStep(ev{0, roleChunk + chunk("hi")}, ev{time.Second, stopChunk + done}))
		var log eventLog
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithObserver(log.observe))
		rt := c.Transport(memTransport{up})
		resp, err := post(t, context.Background(), rt, "http://oai.test/v1/chat/completions", streamBody)
		require.NoError(t, err)
		var got strings.Builder
		buf := make([]byte, 64<<10)
		for !strings.Contains(got.String(), "[DONE]") {
			n, err := resp.Body.Read(buf)
			got.Write(buf[:n])
			require.NoError(t, err)
		}
		require.NoError(t, resp.Body.Close()) // what an SDK does at [DONE]
		at := log.kinds(event.Attempt)
		require.Len(t, at, 1)
		assert.Equal(t, failure.None, at[0].Class)
		assert.Equal(t, 0, c.Breaker("oai").Snapshot().Failures)
	})
}

// Client.Stream keeps no per-chunk state: a long stream retains only its text.
func TestDefect09StreamMemoryDoesNotGrowWithChunks(t *testing.T) {
	const n = 20_000
	texts := make([]string, n)
	for i := range texts {
		texts[i] = "ab"
	}
	for _, keep := range []bool{true, false} {
		p := fake.New(fake.Stream(texts...))
		c := newClient(t, up("a", p), llmclient.WithStreamAccumulate(keep))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		count := 0
		for s.Next() {
			count++
		}
		require.NoError(t, s.Err())
		runtime.GC()
		runtime.ReadMemStats(&after)
		retained := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		// The text itself is 40 kB; a Chunk per event would be several MB.
		assert.Less(t, retained, int64(512<<10), "keep=%v: %d bytes retained after %d chunks", keep, retained, count)
		if keep {
			assert.Len(t, s.Response().Text, 2*n)
		} else {
			assert.Empty(t, s.Response().Text)
		}
		runtime.KeepAlive(s)
	}
}

// In transport mode, a stream that sends endless keep-alives before its first content
// is handed over once its prefix passes 1 MiB, instead of being buffered without bound;
// Read with an empty buffer returns at once without draining the stream.
func TestDefect09TransportPrefixIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		keepAlives := strings.Repeat(": keep-alive\n\n", (2<<20)/14)
		up := newScript(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			_, _ = io.WriteString(w, keepAlives)
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			_, _ = io.WriteString(w, chunk("hi")+stopChunk+done)
		})
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithFirstTokenTimeout(0))
		rt := c.Transport(memTransport{up})
		var resp *http.Response
		var err error
		returned := make(chan struct{})
		go func() {
			defer close(returned)
			resp, err = post(t, context.Background(), rt, "http://oai.test/v1/chat/completions", streamBody)
		}()
		synctest.Wait()
		select {
		case <-returned:
		default:
			t.Fatal("RoundTrip still buffering keep-alives past the bound")
		}
		require.NoError(t, err)
		n, rerr := resp.Body.Read(nil)
		assert.Equal(t, 0, n)
		assert.NoError(t, rerr, "an empty read returns at once")
		close(release)
		body, rerr := readBody(t, resp)
		require.NoError(t, rerr)
		assert.Equal(t, len(keepAlives), strings.Index(body, "data: "), "every byte is delivered, in order")
		assert.Contains(t, body, "[DONE]")
	})
}
