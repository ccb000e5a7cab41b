package limitstore

import (
	"context"
	"sync"
	"time"
)

// Breakers is implemented by a Store that shares circuit breaker state between the
// Clients that use it (replicas of one service): an upstream whose breaker opened in one
// Client is treated as open by the others until the open period ends or the breaker that
// opened closes again. The memory store implements it for Clients of one process, and
// redisstore across processes. Names are upstream names; they never contain a key.
type Breakers interface {
	// TripBreaker records that name's breaker opened, for d from now. A longer open
	// period already recorded is kept.
	TripBreaker(ctx context.Context, name string, d time.Duration) error
	// BreakerOpen returns how long name's breaker stays open by a recorded trip, 0 when
	// none is in force.
	BreakerOpen(ctx context.Context, name string) (time.Duration, error)
	// ResetBreaker clears name's recorded trip: the breaker that opened closed again
	// (its probe succeeded, or an operator reset it).
	ResetBreaker(ctx context.Context, name string) error
}

// memoryBreakers is the memory store's shared breaker state: the end of each open
// period, by upstream name.
type memoryBreakers struct {
	mu    sync.Mutex
	until map[string]time.Time
}

var _ Breakers = (*memoryStore)(nil)

// TripBreaker implements Breakers.
func (s *memoryStore) TripBreaker(_ context.Context, name string, d time.Duration) error {
	b := &s.breakers
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.until == nil {
		b.until = map[string]time.Time{}
	}
	end := time.Now().Add(max(d, 0))
	if cur, ok := b.until[name]; !ok || end.After(cur) {
		b.until[name] = end
	}
	return nil
}

// BreakerOpen implements Breakers.
func (s *memoryStore) BreakerOpen(_ context.Context, name string) (time.Duration, error) {
	b := &s.breakers
	b.mu.Lock()
	defer b.mu.Unlock()
	end, ok := b.until[name]
	if !ok {
		return 0, nil
	}
	left := time.Until(end)
	if left <= 0 {
		delete(b.until, name)
		return 0, nil
	}
	return left, nil
}

// ResetBreaker implements Breakers.
func (s *memoryStore) ResetBreaker(_ context.Context, name string) error {
	b := &s.breakers
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.until, name)
	return nil
}
