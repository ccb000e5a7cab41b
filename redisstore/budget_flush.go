package redisstore

import (
	"context"
	"fmt"
	"time"
)

// Flush sends the settles queued while Redis was away, within ctx; llmclient's
// Client.Close calls it. While Redis does not answer (or the store leaves it alone after
// a failure, for its probe interval) it tries again each probe interval until ctx ends:
// a Redis that comes back during a shutdown still gets them. It returns an error wrapping
// ErrUnavailable when some are still queued at ctx's end.
func (l *ledger) Flush(ctx context.Context) error {
	for {
		l.flush(ctx, -1)
		l.mu.Lock()
		n := len(l.pending)
		l.mu.Unlock()
		if n == 0 {
			return nil
		}
		t := time.NewTimer(l.s.cfg.probeInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %d budget settles still queued", ErrUnavailable, n)
		case <-t.C:
		}
	}
}
