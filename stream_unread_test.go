package llmclient_test

// A stream whose caller keeps it but stops reading ends once the caller has not read for
// an idle period, however lively the upstream: the read-ahead reads for a caller that is
// away, it does not hold the attempt's slot, key, partition and breaker permit for it.

import (
	"context"
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
)

// dripStep sends one content chunk every `every`, n chunks: an upstream that never
// stalls for a whole idle timeout.
func dripStep(n int, every time.Duration) *fake.StreamStep {
	texts := make([]string, n)
	for i := range texts {
		texts[i] = "x"
	}
	return fake.Stream(texts...).ChunkDelay(every)
}

// freedWithin waits (virtual time) until upstream holds no attempt, up to limit, and
// reports how long that took; ok is false when it still holds one.
func freedWithin(c *llmclient.Client, upstream string, limit time.Duration) (time.Duration, bool) {
	start := time.Now()
	for c.InFlight(upstream) > 0 {
		if time.Since(start) >= limit {
			return time.Since(start), false
		}
		time.Sleep(time.Second)
	}
	return time.Since(start), true
}

// A Stream kept but never read, on an upstream that drips a chunk just inside the
// default 1-minute idle timeout, gives its slot back once it has been unread for an idle
// period, instead of after 4096 chunks (about 67 hours).
func TestStreamNeverReadOnDripFreesSlotAfterIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(dripStep(20000, 59*time.Second), fake.Reply("ok").Forever())
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: []string{"k"},
			Limits: llmclient.Limits{MaxConcurrent: 1}}))
		s, err := c.Stream(context.Background(), chatReq("m"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if d, ok := freedWithin(c, "a", 24*time.Hour); !ok || d > 3*time.Minute {
			t.Fatalf("a stream never read held its slot for %v (freed: %v), want at most ~2 idle periods", d, ok)
		}
		// The slot is free: another call gets it at once.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := c.Complete(ctx, chatReq("m")); err != nil {
			t.Fatalf("the next call on the freed slot: %v", err)
		}
	})
}

// The caller that comes back to a stream ended for not being read reads what was read
// ahead, then the idle timeout's interruption, as when the upstream stalls.
func TestStreamNeverReadEndsWithIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(dripStep(20000, 59*time.Second))
		c := newClient(t, up("a", p, "k"), llmclient.WithStreamContinuation(false))
		s, err := c.Stream(context.Background(), chatReq("m"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if d, ok := freedWithin(c, "a", 24*time.Hour); !ok || d > 3*time.Minute {
			t.Fatalf("held for %v (freed: %v)", d, ok)
		}
		n := 0
		for s.Next() {
			n++
		}
		var e *llmclient.Error
		if !errors.As(s.Err(), &e) || e.Class != failure.StreamInterrupted || !errors.Is(s.Err(), llmclient.ErrIdleTimeout) {
			t.Fatalf("Err = %v, want a stream interruption by the idle timeout", s.Err())
		}
		if n < 1 || n > 5 {
			t.Errorf("read %d chunks after coming back, want the first and the few read ahead", n)
		}
	})
}

// The reasoning phase's longer limit (2m by default) bounds a caller's absence too: a
// reasoning delta every 119s no longer keeps an unread stream for 4096 deltas (~136h).
func TestStreamNeverReadReasoningDripFreesSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		chunks := make([]llmclient.Chunk, 20000)
		for i := range chunks {
			chunks[i] = llmclient.Chunk{Reasoning: "r"}
		}
		p := fake.New(fake.StreamChunks(chunks...).ChunkDelay(119*time.Second), fake.Reply("ok").Forever())
		c := newClient(t, up("a", p, "k"))
		s, err := c.Stream(context.Background(), chatReq("m"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		d, ok := freedWithin(c, "a", 24*time.Hour)
		if !ok || d > 5*time.Minute {
			t.Fatalf("a reasoning stream never read held its attempt for %v (freed: %v)", d, ok)
		}
		if d < 2*time.Minute-time.Second {
			t.Errorf("freed after %v: the reasoning phase's 2m limit applies", d)
		}
	})
}

// With WithKeepAliveResetsIdle, keep-alives keep the upstream's wait alive, but they are
// not the caller's reads: a stream nobody reads still ends.
func TestStreamNeverReadKeepAliveResetsIdleFreesSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Stream("a", "b").StallAfter(1, 100000*time.Hour).KeepAlive(30*time.Second), fake.Reply("ok").Forever())
		c := newClient(t, up("a", p, "k"), llmclient.WithKeepAliveResetsIdle(true))
		s, err := c.Stream(context.Background(), chatReq("m"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if d, ok := freedWithin(c, "a", 1000*time.Hour); !ok || d > 3*time.Minute {
			t.Fatalf("a stream nobody reads, upstream sending keep-alives, held its attempt for %v (freed: %v)", d, ok)
		}
	})
}

// A caller that reads slowly, but within the idle timeout, is unaffected: one chunk every
// 50s of a 59s drip for an hour, the read-ahead reading in between.
func TestStreamSlowReaderWithinIdleUnaffected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(dripStep(100, 59*time.Second))
		c := newClient(t, up("a", p, "k"), llmclient.WithStreamContinuation(false))
		s, err := c.Stream(context.Background(), chatReq("m"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		start := time.Now()
		n := 0
		for time.Since(start) < time.Hour {
			time.Sleep(50 * time.Second)
			if !s.Next() {
				t.Fatalf("the stream ended after %d chunks and %v: %v", n, time.Since(start), s.Err())
			}
			if got := s.Current().Text; got != "x" {
				t.Fatalf("chunk %d = %q", n, got)
			}
			n++
			if c.InFlight("a") != 1 {
				t.Fatalf("in flight %d while the stream is read", c.InFlight("a"))
			}
		}
		if n < 30 {
			t.Errorf("read %d chunks in an hour", n) // one at most every 50s + 59s
		}
	})
}

// A caller that reads ahead of a fast upstream at its own slow pace (one chunk every
// 50s, the chunks waiting read ahead) is unaffected too.
func TestStreamSlowReaderOfBufferedChunksUnaffected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(dripStep(200, time.Second))
		c := newClient(t, up("a", p, "k"), llmclient.WithStreamContinuation(false))
		s, err := c.Stream(context.Background(), chatReq("m"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		n := 0
		for s.Next() {
			n++
			time.Sleep(50 * time.Second)
		}
		if s.Err() != nil || n < 200 {
			t.Fatalf("read %d chunks, err %v; want all 200 and the end", n, s.Err())
		}
	})
}

// Transport mode: an SDK that neither reads nor closes a streamed body no longer keeps
// its attempt until the body buffered 1 MiB (~125h of a drip): it ends once unread for
// an idle period. (Not continued: a continuation is another attempt.)
func TestTransportBodyNeverReadFreesAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		events := []ev{{0, roleChunk}}
		for range 100000 {
			events = append(events, ev{59 * time.Second, chunk("x")})
		}
		srv := newScript(sseStep(events...))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithStreamContinuation(false))
		rt := c.Transport(memTransport{srv})
		resp, err := post(t, context.Background(), rt, "http://oai.test/v1/chat/completions",
			`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if d, ok := freedWithin(c, "oai", 2000*time.Hour); !ok || d > 5*time.Minute {
			t.Fatalf("a Transport stream body neither read nor closed held its attempt for %v (freed: %v)", d, ok)
		}
	})
}

// Transport mode: an SDK that reads a drip slowly, within the idle timeout, reads it to
// its end.
func TestTransportBodySlowReaderWithinIdleUnaffected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		events := []ev{{0, roleChunk}}
		for range 60 {
			events = append(events, ev{59 * time.Second, chunk("x")})
		}
		events = append(events, ev{59 * time.Second, stopChunk + done})
		srv := newScript(sseStep(events...))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithStreamContinuation(false))
		rt := c.Transport(memTransport{srv})
		resp, err := post(t, context.Background(), rt, "http://oai.test/v1/chat/completions",
			`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got []byte
		buf := make([]byte, 64) // smaller than an event: bytes wait read between reads
		for {
			time.Sleep(50 * time.Second)
			n, err := resp.Body.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("Read after %d bytes: %v", len(got), err)
			}
		}
		if want := len(roleChunk) + 60*len(chunk("x")) + len(stopChunk+done); len(got) != want {
			t.Fatalf("read %d bytes, want %d", len(got), want)
		}
	})
}
