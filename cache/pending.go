package cache

import (
	"context"
	"sync"
)

// Flush waits until no answer is being stored: the stores that calls left running
// when they returned their answers (see WithStoreTimeout), each bounded by the store
// timeout (without one, a shared call's by its callers' deadlines or its idempotency
// window). It returns ctx's error if ctx ends first. Call it before closing the store's
// client (a Redis client), at shutdown or at the end of a test, so that the last answers
// are kept and no goroutine of the cache outlives it. Calls may go on meanwhile; Flush
// then returns at a moment when none of their stores is under way. It returns at once
// for a store that never blocks (NewMemory), which is written before a call returns. It
// is safe for concurrent use.
func (c *Cache) Flush(ctx context.Context) error { return c.writes.wait(ctx) }

// pending counts the stores under way. Unlike a sync.WaitGroup, it may be waited for
// while stores begin.
type pending struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n falls to 0
}

func (p *pending) add() {
	p.mu.Lock()
	if p.n == 0 {
		p.idle = make(chan struct{})
	}
	p.n++
	p.mu.Unlock()
}

func (p *pending) done() {
	p.mu.Lock()
	p.n--
	if p.n == 0 {
		close(p.idle)
	}
	p.mu.Unlock()
}

func (p *pending) wait(ctx context.Context) error {
	p.mu.Lock()
	if p.n == 0 {
		p.mu.Unlock()
		return nil
	}
	idle := p.idle
	p.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
