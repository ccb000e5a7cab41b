package rediscache_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/rediscache"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return c
}

func entry(text string) *cache.Entry {
	u := llmclient.Usage{InputTokens: 3, OutputTokens: 1}
	return &cache.Entry{
		Response: llmclient.Response{Text: text, FinishReason: finish.Stop, Usage: u, Upstream: "a"},
		Chunks:   []llmclient.Chunk{{Text: text[:1]}, {Text: text[1:], FinishReason: finish.Stop, Usage: &u}},
		Created:  time.Unix(1700000000, 5), Fingerprint: "xk",
	}
}

func TestStoreRoundTrip(t *testing.T) {
	srv := startRedis(t)
	st, rdb := srv.store(rediscache.WithPrefix("test:"))
	e, err := st.Get(ctx(t), "k")
	require.NoError(t, err)
	assert.Nil(t, e, "a miss")

	want := entry("hello")
	require.NoError(t, st.Set(ctx(t), "k", want, time.Minute))
	got, err := st.Get(ctx(t), "k")
	require.NoError(t, err)
	got.Created = want.Created
	assert.Equal(t, want, got)

	pttl, err := rdb.PTTL(ctx(t), "test:k").Result()
	require.NoError(t, err)
	assert.Greater(t, pttl, 50*time.Second)
	assert.LessOrEqual(t, pttl, time.Minute)

	// A TTL that is not positive deletes; a sub-millisecond one still stores, for 1ms.
	require.NoError(t, st.Set(ctx(t), "k", want, 0))
	e, err = st.Get(ctx(t), "k")
	require.NoError(t, err)
	assert.Nil(t, e)
	require.NoError(t, st.Set(ctx(t), "short", want, time.Nanosecond))
	assert.Eventually(t, func() bool {
		e, err := st.Get(ctx(t), "short")
		return err == nil && e == nil
	}, 5*time.Second, 5*time.Millisecond, "Redis expires it")
	// A huge TTL is accepted as it is.
	require.NoError(t, st.Set(ctx(t), "long", want, time.Duration(1<<63-1)))
	e, err = st.Get(ctx(t), "long")
	require.NoError(t, err)
	assert.NotNil(t, e)
}

func TestStoreBoundsAndCorruption(t *testing.T) {
	srv := startRedis(t)
	st, rdb := srv.store(rediscache.WithMaxEntryBytes(500))
	require.NoError(t, st.Set(ctx(t), "big", entry(strings.Repeat("x", 600)), time.Minute))
	e, err := st.Get(ctx(t), "big")
	require.NoError(t, err)
	assert.Nil(t, e)
	assert.Equal(t, uint64(1), st.StoreStats().Rejected)

	require.NoError(t, rdb.Set(ctx(t), rediscache.DefaultPrefix+"bad", "not an entry", time.Minute).Err())
	_, err = st.Get(ctx(t), "bad")
	assert.ErrorIs(t, err, cache.ErrCorruptEntry)
	assert.Equal(t, uint64(1), st.Corrupt())

	for _, n := range []int{0, -1, cache.MaxEncodedEntry + 1} {
		_, err := rediscache.New(rdb, rediscache.WithMaxEntryBytes(n))
		assert.Error(t, err, n)
	}
	_, err = rediscache.New(nil)
	assert.Error(t, err)
}

// newClient returns a Client with the cache over one upstream served by p. The cache's
// stores under way are waited for when the test ends, before its Redis client closes.
func newClient(t *testing.T, c *cache.Cache, p llmclient.Provider) *llmclient.Client {
	cl, err := llmclient.New(llmclient.WithMiddleware(c.Middleware()),
		llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p}))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		assert.NoError(t, c.Flush(ctx))
	})
	return cl
}

func chat(text string) *llmclient.Request {
	return &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage(text)}}
}

// Two replicas share one Redis: an answer one paid for serves the other, streams replay
// chunk by chunk, partitions stay apart, and an idempotency key finds the first answer.
// An answer is shared once it is stored, which its call does not wait for: Flush does.
func TestReplicasShareTheCache(t *testing.T) {
	srv := startRedis(t)
	part := cache.WithPartition(cache.PartitionByMetadata("tenant"))
	var ca *cache.Cache
	newReplica := func(p llmclient.Provider) *llmclient.Client {
		st, _ := srv.store()
		c, err := cache.New(st, part, cache.WithStoreTimeout(2*time.Second))
		require.NoError(t, err)
		if ca == nil {
			ca = c
		}
		return newClient(t, c, p)
	}
	pa, pb := fake.New(fake.Stream("Hel", "lo"), fake.Reply("idem")), fake.New(fake.Reply("for t2"), fake.Reply("b's own"))
	a, b := newReplica(pa), newReplica(pb)

	s, err := a.Stream(ctx(t), chat("hi"))
	require.NoError(t, err)
	var live []llmclient.Chunk
	for s.Next() {
		live = append(live, s.Current())
	}
	require.NoError(t, s.Err())
	s.Close()
	require.NoError(t, ca.Flush(ctx(t)))

	s, err = b.Stream(ctx(t), chat("hi"))
	require.NoError(t, err)
	var replay []llmclient.Chunk
	for s.Next() {
		replay = append(replay, s.Current())
	}
	require.NoError(t, s.Err())
	s.Close()
	assert.Equal(t, live, replay, "chunk by chunk, from the other replica")
	assert.Equal(t, 0, pb.Calls())

	other := chat("hi")
	other.Metadata = map[string]string{"tenant": "t2"}
	r, err := b.Complete(ctx(t), other)
	require.NoError(t, err)
	assert.Equal(t, "for t2", r.Text, "another partition is not served a's answer")

	ik := cache.WithIdempotencyKey(ctx(t), "job-7")
	r, err = a.Complete(ik, chat("idempotent"))
	require.NoError(t, err)
	assert.Equal(t, "idem", r.Text)
	require.NoError(t, ca.Flush(ctx(t)))
	r, err = b.Complete(cache.WithControl(ik, cache.Control{NoCache: true}), chat("idempotent"))
	require.NoError(t, err)
	assert.Equal(t, "idem", r.Text, "the repeat on another replica gets the first answer")
	assert.Equal(t, 1, pb.Calls())
}

// A Redis that is gone costs a miss: the call is answered by the upstream.
func TestRedisDownFailsOpen(t *testing.T) {
	srv := startRedis(t)
	st, _ := srv.store()
	var errs int
	c, err := cache.New(st, cache.WithStoreTimeout(time.Second), cache.WithObserver(func(_ context.Context, e cache.Event) {
		if e.Kind == cache.EventStoreError {
			errs++
		}
	}))
	require.NoError(t, err)
	cl := newClient(t, c, fake.New(fake.Reply("ok").Forever()))
	srv.stop()
	r, err := cl.Complete(ctx(t), chat("hi"))
	require.NoError(t, err)
	assert.Equal(t, "ok", r.Text)
	require.NoError(t, c.Flush(ctx(t)))
	assert.Equal(t, 2, errs, "the lookup and the store failed")
}

// A value far larger than any entry (put there by something else sharing the Redis, or
// damaged) is refused after reading one byte more than the store's bound, not all of it,
// even under the largest bound a store may have (cache.MaxEncodedEntry).
func TestGetReadsAtMostAnEntry(t *testing.T) {
	srv := startRedis(t)
	const huge = 3 * cache.MaxEncodedEntry // 192 MiB, of zero bytes: SETRANGE sends one
	// 64 MiB through loopback: generous deadlines, so that a loaded machine is no failure.
	// go-redis bounds each command by the sooner of the context's deadline and the
	// client's ReadTimeout (3s by default), so this test's client has minute-long ones.
	rdb := redis.NewClient(&redis.Options{Addr: srv.addr(), ContextTimeoutEnabled: true, MaxRetries: -1,
		ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	defer rdb.Close()
	st, err := rediscache.New(rdb, rediscache.WithMaxEntryBytes(cache.MaxEncodedEntry))
	require.NoError(t, err)
	slow, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, rdb.SetRange(slow, rediscache.DefaultPrefix+"huge", huge-1, "x").Err())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = st.Get(slow, "huge")
	runtime.ReadMemStats(&after)
	assert.ErrorIs(t, err, cache.ErrCorruptEntry)
	read := after.TotalAlloc - before.TotalAlloc
	assert.Less(t, read, uint64(2*cache.MaxEncodedEntry), "allocated %d MiB for a %d MiB value", read>>20, huge>>20)
	assert.Equal(t, uint64(1), st.Corrupt())

	// An empty value, like a missing key, is no entry.
	require.NoError(t, rdb.Set(ctx(t), rediscache.DefaultPrefix+"empty", "", time.Minute).Err())
	e, err := st.Get(ctx(t), "empty")
	require.NoError(t, err)
	assert.Nil(t, e)
}

// The store never writes an entry above its own bound (1 MiB by default), so a lookup
// reads no more than that of whatever the key holds: a junk value of 16 MiB under a hot
// key cost each lookup 16 MiB when the lookup read up to cache.MaxEncodedEntry (64 MiB).
// An entry written under a larger bound, by another process, is a miss here.
func TestGetReadsAtMostTheStoresBound(t *testing.T) {
	srv := startRedis(t)
	st, rdb := srv.store() // DefaultMaxEntryBytes
	const junk = 16 << 20  // of zero bytes: SETRANGE sends one
	require.NoError(t, rdb.SetRange(ctx(t), rediscache.DefaultPrefix+"hot", junk-1, "x").Err())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := st.Get(ctx(t), "hot")
	runtime.ReadMemStats(&after)
	assert.ErrorIs(t, err, cache.ErrCorruptEntry)
	read := after.TotalAlloc - before.TotalAlloc
	assert.Less(t, read, uint64(4*rediscache.DefaultMaxEntryBytes),
		"one lookup allocated %d MiB; the store's entries are at most %d MiB", read>>20, rediscache.DefaultMaxEntryBytes>>20)
	assert.Equal(t, uint64(1), st.Corrupt())

	small, _ := srv.store(rediscache.WithMaxEntryBytes(1000))
	require.NoError(t, st.Set(ctx(t), "big", entry(strings.Repeat("x", 2000)), time.Minute))
	e, err := st.Get(ctx(t), "big")
	require.NoError(t, err)
	require.NotNil(t, e, "within the bound of the store that wrote it")
	_, err = small.Get(ctx(t), "big")
	assert.ErrorIs(t, err, cache.ErrCorruptEntry, "past the bound of the store that reads it")
	require.NoError(t, small.Set(ctx(t), "fits", entry(strings.Repeat("x", 200)), time.Minute))
	e, err = small.Get(ctx(t), "fits")
	require.NoError(t, err)
	assert.NotNil(t, e)
}

// go-redis ignores a context's deadline unless ContextTimeoutEnabled is set: a Redis that
// accepted the connection and never answered then held every lookup for the client's
// ReadTimeout (two store calls took 10 s with the defaults, against a store timeout of
// 100 ms). New refuses such a client.
func TestNewRequiresContextTimeouts(t *testing.T) {
	for name, rdb := range map[string]redis.UniversalClient{
		"client":  redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}),
		"cluster": redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}),
		"ring":    redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}}),
	} {
		_, err := rediscache.New(rdb)
		assert.ErrorContains(t, err, "ContextTimeoutEnabled", name)
		require.NoError(t, rdb.Close())
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer rdb.Close()
	_, err := rediscache.New(rdb)
	assert.NoError(t, err)
}

// An entry too large to store replaces the one under its key all the same, as the memory
// store does: a fresh answer (NoCache, MaxAge) that cannot be kept must not leave the
// stale one it replaces to answer the next calls.
func TestRejectedEntryRemovesTheOldOne(t *testing.T) {
	srv := startRedis(t)
	st, _ := srv.store(rediscache.WithMaxEntryBytes(500))
	require.NoError(t, st.Set(ctx(t), "k", entry("old"), time.Minute))
	require.NoError(t, st.Set(ctx(t), "k", entry(strings.Repeat("x", 600)), time.Minute))
	assert.Equal(t, uint64(1), st.StoreStats().Rejected)
	e, err := st.Get(ctx(t), "k")
	require.NoError(t, err)
	assert.Nil(t, e, "the stale answer is gone")
	// So does one with more chunks than an entry may hold.
	require.NoError(t, st.Set(ctx(t), "k", entry("old"), time.Minute))
	require.NoError(t, st.Set(ctx(t), "k", &cache.Entry{Chunks: make([]llmclient.Chunk, cache.MaxEncodedEntry/160+1)}, time.Minute))
	assert.Equal(t, uint64(2), st.StoreStats().Rejected)
	e, err = st.Get(ctx(t), "k")
	require.NoError(t, err)
	assert.Nil(t, e)

	mem, err := cache.NewMemory(cache.MemoryConfig{MaxEntryBytes: 1500})
	require.NoError(t, err)
	require.NoError(t, mem.Set(ctx(t), "k", entry("old"), time.Minute))
	require.NoError(t, mem.Set(ctx(t), "k", entry(strings.Repeat("x", 600)), time.Minute))
	e, err = mem.Get(ctx(t), "k")
	require.NoError(t, err)
	assert.Nil(t, e, "as in the memory store")
}
