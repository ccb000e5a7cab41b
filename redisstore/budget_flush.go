package redisstore

import (
	"context"
	"fmt"
)

// Flush sends the settles queued while Redis was away, within ctx; llmclient's
// Client.Close calls it. It returns an error wrapping ErrUnavailable when some are still
// queued (Redis did not answer).
func (l *ledger) Flush(ctx context.Context) error {
	l.flush(ctx, -1)
	l.mu.Lock()
	n := len(l.pending)
	l.mu.Unlock()
	if n > 0 {
		return fmt.Errorf("%w: %d budget settles still queued", ErrUnavailable, n)
	}
	return nil
}
