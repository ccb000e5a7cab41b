package pricing

import (
	"sync"
	"sync/atomic"
)

// lookupCache remembers Lookup results. Reads take an immutable map through an atomic
// pointer, without locks; new entries wait in a mutex-guarded map and are published, by
// copying, once they have been read as often as that map has entries (the scheme of
// sync.Map, with typed keys, whose hashing is several times cheaper than sync.Map's hashing
// of an interface). The whole cache is dropped when it reaches maxCached entries.
type lookupCache struct {
	read   atomic.Pointer[map[lookupKey]*Model]
	mu     sync.Mutex
	dirty  map[lookupKey]*Model // entries not in read
	misses int                  // reads served from dirty since the last publication
}

type lookupKey struct{ provider, model string }

// maxCached bounds the lookup cache: when it holds this many (provider, model) pairs it is
// emptied, so model names an upstream makes up cannot grow memory without bound.
const maxCached = 4096

// load returns the cached result for k; a nil *Model with ok true is a remembered miss.
func (c *lookupCache) load(k lookupKey) (m *Model, ok bool) {
	if read := c.read.Load(); read != nil {
		if m, ok = (*read)[k]; ok {
			return m, true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok = c.dirty[k]; ok {
		if c.misses++; c.misses >= len(c.dirty) {
			c.publish()
		}
	}
	return m, ok
}

// store remembers m for k.
func (c *lookupCache) store(k lookupKey, m *Model) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var read map[lookupKey]*Model
	if p := c.read.Load(); p != nil {
		read = *p
	}
	if _, ok := read[k]; ok {
		return
	}
	if len(read)+len(c.dirty) >= maxCached {
		c.read.Store(nil)
		c.dirty, c.misses = nil, 0
	}
	if c.dirty == nil {
		c.dirty = make(map[lookupKey]*Model)
	}
	c.dirty[k] = m
}

// publish merges dirty into a new read map. c.mu is held.
func (c *lookupCache) publish() {
	var read map[lookupKey]*Model
	if p := c.read.Load(); p != nil {
		read = *p
	}
	merged := make(map[lookupKey]*Model, len(read)+len(c.dirty))
	for k, v := range read {
		merged[k] = v
	}
	for k, v := range c.dirty {
		merged[k] = v
	}
	c.read.Store(&merged)
	c.dirty, c.misses = nil, 0
}
