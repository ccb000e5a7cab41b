package cache_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func withKey(key string, d time.Duration) func() (context.Context, context.CancelFunc) {
	return func() (context.Context, context.CancelFunc) {
		ctx := cache.WithIdempotencyKey(context.Background(), key)
		if d == 0 {
			return context.WithCancel(ctx)
		}
		return context.WithTimeout(ctx, d)
	}
}

// A caller times out and repeats its call with the same key: the repeat gets the first
// call's answer, which kept running past the first caller's timeout. One upstream call.
func TestIdempotentRetryAfterTimeoutGetsTheFirstAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ev events
		c, _ := newCache(t, cache.WithTTL(0), cache.WithObserver(ev.observe))
		p := fake.New(fake.Reply("generated once").Latency(3*time.Second), fake.Reply("generated twice"))
		cl := client(t, p, c.Middleware())

		first := <-callAt(cl, 0, chat("hi"), withKey("job-1", time.Second))
		assert.Equal(t, failure.Timeout, llmclient.ClassOf(first.err))
		// The retry joins the call still in flight.
		retry := <-callAt(cl, 0, chat("hi"), withKey("job-1", 10*time.Second))
		require.NoError(t, retry.err)
		assert.Equal(t, "generated once", retry.resp.Text)
		assert.Equal(t, 2*time.Second, retry.at, "the answer arrived 3s after the first call")
		// A later repeat gets the stored answer, even asking for no-cache.
		later := <-callAt(cl, time.Minute, chat("hi"), func() (context.Context, context.CancelFunc) {
			ctx, cancel := withKey("job-1", 0)()
			return cache.WithControl(ctx, cache.Control{NoCache: true}), cancel
		})
		require.NoError(t, later.err)
		assert.Equal(t, "generated once", later.resp.Text)
		assert.Equal(t, 1, p.Calls())
		assert.Equal(t, uint64(1), c.Stats().Shared)
		assert.Equal(t, uint64(1), c.Stats().Replays)
		assert.Len(t, ev.of(cache.EventReplay), 1)

		// Without a key (and with the exact cache off) the same request is a new call.
		r := <-callAt(cl, 0, chat("hi"), noDeadline)
		require.NoError(t, r.err)
		assert.Equal(t, "generated twice", r.resp.Text)
	})
}

func TestIdempotencyKeyReusedForAnotherRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newCache(t)
		p := fake.New(fake.Reply("a").Latency(time.Second), fake.Reply("b"))
		cl := client(t, p, c.Middleware())
		inFlight := callAt(cl, 0, chat("hi"), withKey("k", 0))
		during := <-callAt(cl, 100*time.Millisecond, chat("bye"), withKey("k", 0))
		assert.ErrorIs(t, during.err, cache.ErrIdempotencyMismatch)
		assert.Equal(t, failure.BadRequest, llmclient.ClassOf(during.err))
		require.NoError(t, (<-inFlight).err)
		after := <-callAt(cl, 0, chat("bye"), withKey("k", 0))
		assert.ErrorIs(t, after.err, cache.ErrIdempotencyMismatch)
		// The same key in another partition is another key.
		other := <-callAt(cl, 0, chat("bye"), func() (context.Context, context.CancelFunc) {
			ctx, cancel := withKey("k", 0)()
			return llmclient.WithPartition(ctx, "other"), cancel
		})
		require.NoError(t, other.err)
		assert.Equal(t, "b", other.resp.Text)
		assert.Equal(t, 2, p.Calls())
	})
}

// The first call under a key runs at most the idempotency window once its caller is gone,
// and its answer is kept for the window.
func TestIdempotencyWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newCache(t, cache.WithTTL(0), cache.WithIdempotencyTTL(time.Minute))
		p := fake.New(fake.Reply("too late").Latency(time.Hour), fake.Reply("fresh"), fake.Reply("after window"))
		cl := client(t, p, c.Middleware())
		r := <-callAt(cl, 0, chat("hi"), withKey("k", time.Second))
		assert.Error(t, r.err)
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Equal(t, 0, c.Stats().InFlight, "the detached call ended with the window")
		r = <-callAt(cl, 0, chat("hi"), withKey("k", 0))
		require.NoError(t, r.err)
		assert.Equal(t, "fresh", r.resp.Text)
		time.Sleep(time.Minute)
		r = <-callAt(cl, 0, chat("hi"), withKey("k", 0))
		require.NoError(t, r.err)
		assert.Equal(t, "after window", r.resp.Text, "the stored answer expired with the window")
	})
}

// A Stream under a key waits for a Complete in flight under it, and replays an arrived
// answer.
func TestIdempotentStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newCache(t, cache.WithTTL(0))
		p := fake.New(fake.Reply("once").Latency(time.Second))
		cl := client(t, p, c.Middleware())
		first := callAt(cl, 0, chat("hi"), withKey("k", 0))
		time.Sleep(100 * time.Millisecond)
		s, err := cl.Stream(cache.WithIdempotencyKey(context.Background(), "k"), chat("hi"))
		require.NoError(t, err)
		chunks, err := readAll(t, s)
		require.NoError(t, err)
		require.Len(t, chunks, 1)
		assert.Equal(t, "once", chunks[0].Text)
		require.NoError(t, (<-first).err)
		s, err = cl.Stream(cache.WithIdempotencyKey(context.Background(), "k"), chat("hi"))
		require.NoError(t, err)
		chunks, err = readAll(t, s)
		require.NoError(t, err)
		assert.Equal(t, "once", chunks[0].Text)
		assert.Equal(t, 1, p.Calls())
	})
}

// A stream under a key is stored under it once it ends cleanly.
func TestIdempotentStreamStored(t *testing.T) {
	c, _ := newCache(t, cache.WithTTL(0))
	p := fake.New(fake.Stream("a", "b"))
	cl := client(t, p, c.Middleware())
	ctx := cache.WithIdempotencyKey(context.Background(), "k")
	s, err := cl.Stream(ctx, chat("hi"))
	require.NoError(t, err)
	live, err := readAll(t, s)
	require.NoError(t, err)
	r, err := cl.Complete(ctx, chat("hi"))
	require.NoError(t, err)
	assert.Equal(t, "ab", r.Text)
	s, err = cl.Stream(ctx, chat("hi"))
	require.NoError(t, err)
	again, err := readAll(t, s)
	require.NoError(t, err)
	assert.Equal(t, live, again)
	assert.Equal(t, 1, p.Calls())
}

type traceKey struct{}

// The answer of a first call whose caller gave up is stored after that caller returned:
// its store is reported from the call that went on, with the first caller's context
// values (WithObserver).
func TestIdempotentStoreReportedAfterTheCallerLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var stored []any
		c, m := newCache(t, cache.WithTTL(0), cache.WithObserver(func(ctx context.Context, e cache.Event) {
			if e.Kind == cache.EventStored {
				mu.Lock()
				stored = append(stored, ctx.Value(traceKey{}))
				mu.Unlock()
			}
		}))
		p := fake.New(fake.Reply("late").Latency(3 * time.Second))
		cl := client(t, p, c.Middleware())
		ctx, cancel := context.WithTimeout(context.WithValue(cache.WithIdempotencyKey(context.Background(), "k"), traceKey{}, "trace-1"), time.Second)
		defer cancel()
		_, err := cl.Complete(ctx, chat("hi"))
		assert.Equal(t, failure.Timeout, llmclient.ClassOf(err))
		mu.Lock()
		assert.Empty(t, stored, "not yet arrived")
		mu.Unlock()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		mu.Lock()
		assert.Equal(t, []any{"trace-1"}, stored)
		mu.Unlock()
		assert.Equal(t, int64(1), m.StoreStats().Entries)
	})
}

// The idempotency window bounds how long the first call runs once its caller has gone,
// not the call itself: a caller that waits longer than the window, within its own
// deadline, gets its answer. A repeat that joins the call keeps it running while it
// waits; the window starts again when it goes.
func TestIdempotencyWindowStartsWhenTheCallerGoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newCache(t, cache.WithTTL(0), cache.WithIdempotencyTTL(time.Minute))
		p := fake.New(fake.Reply("slow").Latency(2*time.Minute), fake.Reply("slower").Latency(3*time.Minute))
		cl := client(t, p, c.Middleware())
		r := <-callAt(cl, 0, chat("hi"), withKey("a", 5*time.Minute))
		require.NoError(t, r.err, "the caller was still there")
		assert.Equal(t, "slow", r.resp.Text)
		assert.Equal(t, 2*time.Minute, r.at)

		// The first caller goes at 30s; a repeat joins at 80s (within the window) and
		// waits past the window's first end (90s) for the answer at 180s.
		first := callAt(cl, 0, chat("hi"), withKey("b", 30*time.Second))
		repeat := callAt(cl, 80*time.Second, chat("hi"), withKey("b", 0))
		assert.Error(t, (<-first).err)
		rr := <-repeat
		require.NoError(t, rr.err)
		assert.Equal(t, "slower", rr.resp.Text)
		assert.Equal(t, 3*time.Minute, rr.at)
		assert.Equal(t, 2, p.Calls())
	})
}

// A first call under a key that fails keeps nothing under the key: its repeat, and a
// caller that joined it, get its error, and the next repeat makes a new call.
func TestIdempotentFailureIsNotKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newCache(t, cache.WithTTL(0))
		p := fake.New(fake.Fail(500).Latency(time.Second), fake.Reply("second try"))
		cl := client(t, p, c.Middleware(), llmclient.WithMaxAttempts(1))
		first := callAt(cl, 0, chat("hi"), withKey("k", 0))
		joined := callAt(cl, 100*time.Millisecond, chat("hi"), withKey("k", 0))
		f, j := <-first, <-joined
		assert.Equal(t, failure.ServerError, llmclient.ClassOf(f.err))
		assert.Equal(t, failure.ServerError, llmclient.ClassOf(j.err), "the joined caller gets the same error")
		r := <-callAt(cl, 0, chat("hi"), withKey("k", 0))
		require.NoError(t, r.err)
		assert.Equal(t, "second try", r.resp.Text)
		assert.Equal(t, 2, p.Calls())
		assert.Equal(t, uint64(1), c.Stats().Shared)
	})
}

// A rolling deploy that changes WithKeyMetadata changes the exact key but not the
// idempotency key: a caller's retry reaching a replica of the other build replays the
// first answer (it was refused as another request, the record's fingerprint being the
// other build's exact key). Another request under the key is still refused; a request
// whose key metadata only one build keys cannot be compared, and is a miss.
func TestIdempotencyAcrossADeployThatChangesKeyMetadata(t *testing.T) {
	m, err := cache.NewMemory(cache.MemoryConfig{})
	require.NoError(t, err)
	before, err := cache.New(m)
	require.NoError(t, err)
	after, err := cache.New(m, cache.WithKeyMetadata("prompt_version"))
	require.NoError(t, err)
	pa, pb := fake.New(fake.Reply("first").Forever()), fake.New(fake.Reply("second").Forever())
	a, b := client(t, pa, before.Middleware()), client(t, pb, after.Middleware())
	versioned := func(text, v string) *llmclient.Request {
		r := chat(text)
		r.Metadata = map[string]string{"prompt_version": v}
		return r
	}
	ik := func(k string) context.Context { return cache.WithIdempotencyKey(context.Background(), k) }

	r, err := a.Complete(ik("job-1"), chat("same request"))
	require.NoError(t, err)
	require.Equal(t, "first", r.Text)
	r, err = b.Complete(ik("job-1"), chat("same request"))
	require.NoError(t, err, "the retry on the other build")
	assert.Equal(t, "first", r.Text)
	assert.Equal(t, 0, pb.Calls())
	_, err = b.Complete(ik("job-1"), chat("another request"))
	assert.ErrorIs(t, err, cache.ErrIdempotencyMismatch)

	r, err = a.Complete(ik("job-2"), versioned("same request", "v2"))
	require.NoError(t, err)
	require.Equal(t, "first", r.Text)
	r, err = b.Complete(ik("job-2"), versioned("same request", "v2"))
	require.NoError(t, err, "the builds disagree on what the request is: a miss, not an error")
	assert.Equal(t, "second", r.Text)

	// Within one build, other key metadata under the key is another request.
	_, err = b.Complete(ik("job-2"), versioned("same request", "v3"))
	assert.ErrorIs(t, err, cache.ErrIdempotencyMismatch)
	r, err = b.Complete(ik("job-2"), versioned("same request", "v2"))
	require.NoError(t, err)
	assert.Equal(t, "second", r.Text)
	assert.Equal(t, 1, pb.Calls())
}
