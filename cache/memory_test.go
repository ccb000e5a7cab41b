package cache_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/finish"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func entryOf(text string) *cache.Entry {
	return &cache.Entry{Response: llmclient.Response{Text: text, FinishReason: finish.Stop}, Created: time.Now()}
}

func mustMemory(t *testing.T, cfg cache.MemoryConfig) *cache.Memory {
	t.Helper()
	m, err := cache.NewMemory(cfg)
	require.NoError(t, err)
	return m
}

func get(t *testing.T, s cache.Store, key string) *cache.Entry {
	t.Helper()
	e, err := s.Get(context.Background(), key)
	require.NoError(t, err)
	return e
}

func set(t *testing.T, s cache.Store, key string, e *cache.Entry, ttl time.Duration) {
	t.Helper()
	require.NoError(t, s.Set(context.Background(), key, e, ttl))
}

func TestMemoryConfig(t *testing.T) {
	for _, cfg := range []cache.MemoryConfig{{MaxBytes: -1}, {MaxEntries: -1}, {MaxEntryBytes: -1}} {
		_, err := cache.NewMemory(cfg)
		assert.Error(t, err, "%+v", cfg)
	}
	// Huge bounds are taken as they are; an entry bound above the total is clamped to it.
	m := mustMemory(t, cache.MemoryConfig{MaxBytes: 1 << 62, MaxEntries: int(^uint(0) >> 1), MaxEntryBytes: int(^uint(0) >> 1)})
	set(t, m, "k", entryOf("x"), time.Hour)
	assert.NotNil(t, get(t, m, "k"))
	small := mustMemory(t, cache.MemoryConfig{MaxBytes: 2000, MaxEntryBytes: 1 << 30})
	set(t, small, "big", entryOf(strings.Repeat("x", 3000)), time.Hour)
	assert.Nil(t, get(t, small, "big"), "larger than the whole store")
	assert.Equal(t, uint64(1), small.StoreStats().Rejected)
}

// The least recently used entries go first when the bytes bound is reached; a Get counts
// as a use.
func TestMemoryLRUByBytes(t *testing.T) {
	one := entryOf(strings.Repeat("x", 1000)).Size() + 2 // key "kN"
	m := mustMemory(t, cache.MemoryConfig{MaxBytes: int64(3 * one)})
	for i := range 3 {
		set(t, m, "k"+strconv.Itoa(i), entryOf(strings.Repeat("x", 1000)), time.Hour)
	}
	require.NotNil(t, get(t, m, "k0")) // k1 is now the least recently used
	set(t, m, "k3", entryOf(strings.Repeat("x", 1000)), time.Hour)
	assert.Nil(t, get(t, m, "k1"), "evicted")
	for _, k := range []string{"k0", "k2", "k3"} {
		assert.NotNil(t, get(t, m, k), k)
	}
	st := m.StoreStats()
	assert.Equal(t, int64(3), st.Entries)
	assert.Equal(t, int64(3*one), st.Bytes)
	assert.Equal(t, uint64(1), st.Evictions)

	// Replacing an entry gives its bytes back first.
	set(t, m, "k0", entryOf(strings.Repeat("x", 1000)), time.Hour)
	assert.Equal(t, uint64(1), m.StoreStats().Evictions)
	assert.Equal(t, int64(3*one), m.StoreStats().Bytes)
}

func TestMemoryEntryBounds(t *testing.T) {
	m := mustMemory(t, cache.MemoryConfig{MaxEntries: 2, MaxEntryBytes: 2000})
	set(t, m, "a", entryOf("a"), time.Hour)
	set(t, m, "b", entryOf("b"), time.Hour)
	set(t, m, "c", entryOf("c"), time.Hour)
	assert.Nil(t, get(t, m, "a"))
	assert.Equal(t, int64(2), m.StoreStats().Entries)

	set(t, m, "big", entryOf(strings.Repeat("x", 2000)), time.Hour)
	assert.Nil(t, get(t, m, "big"), "larger than MaxEntryBytes")
	assert.Equal(t, uint64(1), m.StoreStats().Rejected)

	// A TTL that is not positive stores nothing and removes what was there.
	set(t, m, "b", entryOf("b"), 0)
	assert.Nil(t, get(t, m, "b"))
	set(t, m, "c", entryOf("c"), -time.Second)
	assert.Nil(t, get(t, m, "c"))
	assert.Equal(t, int64(0), m.StoreStats().Bytes)
}

// TTLs run in virtual time: an entry is served until its TTL and never after.
func TestMemoryTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMemory(t, cache.MemoryConfig{})
		set(t, m, "k", entryOf("x"), time.Minute)
		set(t, m, "forever", entryOf("y"), time.Duration(1<<63-1))
		time.Sleep(time.Minute - time.Nanosecond)
		assert.NotNil(t, get(t, m, "k"))
		time.Sleep(time.Nanosecond)
		assert.Nil(t, get(t, m, "k"))
		assert.Equal(t, uint64(1), m.StoreStats().Expired)
		time.Sleep(24 * 365 * time.Hour)
		assert.NotNil(t, get(t, m, "forever"), "a huge TTL does not wrap around")
	})
}

// Expired entries are the first to go when room is needed, and count as expired.
func TestMemoryExpiredEvictedAsExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMemory(t, cache.MemoryConfig{MaxEntries: 1})
		set(t, m, "a", entryOf("a"), time.Second)
		time.Sleep(2 * time.Second)
		set(t, m, "b", entryOf("b"), time.Second)
		st := m.StoreStats()
		assert.Equal(t, uint64(1), st.Expired)
		assert.Equal(t, uint64(0), st.Evictions)
	})
}

func TestMemoryConcurrent(t *testing.T) {
	m := mustMemory(t, cache.MemoryConfig{MaxEntries: 50})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				k := strconv.Itoa((g*31 + i) % 100)
				if i%3 == 0 {
					_ = m.Set(context.Background(), k, entryOf(k), time.Hour)
				} else if e, _ := m.Get(context.Background(), k); e != nil {
					assert.Equal(t, k, e.Response.Text)
				}
				_ = m.StoreStats()
			}
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, m.StoreStats().Entries, int64(50))
}
