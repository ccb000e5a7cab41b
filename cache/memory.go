package cache

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"time"
)

// Memory-store defaults, used for the zero fields of MemoryConfig.
const (
	DefaultMaxBytes      = 64 << 20
	DefaultMaxEntries    = 100_000
	DefaultMaxEntryBytes = 1 << 20
)

// MemoryConfig bounds a memory store. A zero field takes its default; a negative one is
// an error.
type MemoryConfig struct {
	// MaxBytes bounds the entries' total size: Entry.Size plus the length of the key,
	// which StoreStats.Bytes reports. Default DefaultMaxBytes.
	MaxBytes int64
	// MaxEntries bounds their number. Default DefaultMaxEntries.
	MaxEntries int
	// MaxEntryBytes is the largest entry stored (Entry.Size plus the length of its key);
	// a larger one is declined (counted in StoreStats.Rejected). Default
	// DefaultMaxEntryBytes, and at most MaxBytes.
	MaxEntryBytes int
}

// Memory is an in-process Store: least recently used entries are evicted first when the
// total size or the number of entries would pass its bounds, and an entry is never
// returned after its TTL (expired entries are dropped when met, or evicted as the least
// recently used). It starts no goroutine. It is safe for concurrent use.
type Memory struct {
	cfg MemoryConfig

	mu    sync.Mutex
	items map[string]*list.Element
	lru   list.List // front: most recently used; values are *memItem
	bytes int64
	stats StoreStats
}

type memItem struct {
	key     string
	entry   *Entry
	size    int64
	expires time.Time
}

// NewMemory returns an empty memory store bounded by cfg.
func NewMemory(cfg MemoryConfig) (*Memory, error) {
	if cfg.MaxBytes < 0 || cfg.MaxEntries < 0 || cfg.MaxEntryBytes < 0 {
		return nil, errors.New("llmclient/cache: MemoryConfig bounds must not be negative")
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.MaxEntries == 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.MaxEntryBytes == 0 {
		cfg.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if int64(cfg.MaxEntryBytes) > cfg.MaxBytes {
		cfg.MaxEntryBytes = int(min(cfg.MaxBytes, int64(maxInt)))
	}
	return &Memory{cfg: cfg, items: make(map[string]*list.Element)}, nil
}

const maxInt = int(^uint(0) >> 1)

// Get returns the entry under key, unless it expired. It never fails.
func (m *Memory) Get(_ context.Context, key string) (*Entry, error) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.items[key]
	if !ok {
		return nil, nil
	}
	it := el.Value.(*memItem)
	if !now.Before(it.expires) {
		m.remove(el)
		m.stats.Expired++
		return nil, nil
	}
	m.lru.MoveToFront(el)
	return it.entry, nil
}

// Set stores e under key for ttl, evicting the least recently used entries as needed. An
// entry larger than MaxEntryBytes, or a ttl that is not positive, stores nothing (and
// removes what key held). It never fails.
func (m *Memory) Set(_ context.Context, key string, e *Entry, ttl time.Duration) error {
	size := int64(e.Size() + len(key))
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.items[key]; ok {
		m.remove(el)
	}
	if ttl <= 0 {
		return nil
	}
	if size > int64(m.cfg.MaxEntryBytes) {
		m.stats.Rejected++
		return nil
	}
	for m.lru.Len() > 0 && (m.bytes+size > m.cfg.MaxBytes || m.lru.Len() >= m.cfg.MaxEntries) {
		back := m.lru.Back()
		if !now.Before(back.Value.(*memItem).expires) {
			m.stats.Expired++
		} else {
			m.stats.Evictions++
		}
		m.remove(back)
	}
	it := &memItem{key: key, entry: e, size: size, expires: expiry(now, ttl)}
	m.items[key] = m.lru.PushFront(it)
	m.bytes += size
	return nil
}

// expiry is now+ttl, saturating instead of wrapping for huge TTLs.
func expiry(now time.Time, ttl time.Duration) time.Time {
	t := now.Add(ttl)
	if t.Before(now) {
		return time.Unix(1<<62, 0)
	}
	return t
}

func (m *Memory) remove(el *list.Element) {
	it := el.Value.(*memItem)
	m.lru.Remove(el)
	delete(m.items, it.key)
	m.bytes -= it.size
}

// neverBlocks marks a store whose calls return at once: the cache needs no timeout for it.
func (m *Memory) neverBlocks() {}

// StoreStats reports the store's contents and what it dropped.
func (m *Memory) StoreStats() StoreStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats
	s.Entries = int64(m.lru.Len())
	s.Bytes = m.bytes
	return s
}
