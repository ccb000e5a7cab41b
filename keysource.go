package llmclient

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient/keysource"
)

// keySourceRetry spaces the refresh attempts of a source that failed while its current
// credential is still valid.
const keySourceRetry = time.Second

// credential is a value a source returned, with its expiry and the time to refresh it.
type credential struct {
	key              string
	expires, refresh time.Time // zero: never
}

// keySource caches a keysource.Source's credential and refreshes it, one caller at a time.
type keySource struct {
	src keysource.Source
	cur atomic.Pointer[credential]
	// gate is held while src.Key runs. The keys of one source share it (see sourceGate):
	// a source listed twice, or removed by Client.Update while it fetched and then set
	// again, has two keySources, which call it one after the other.
	gate chan struct{}

	mu         sync.Mutex
	refreshing chan struct{} // non-nil while a caller refreshes; closed when it is done
	failedAt   time.Time     // the last failed refresh
	failure    error
}

// get returns the credential to call with now: the current one, unless it is within its
// refresh window (then this caller refreshes it unless another does or one failed just
// before) or expired (then it waits for a refresh, within ctx).
func (s *keySource) get(ctx context.Context, now time.Time) (string, error) {
	for {
		c := s.cur.Load()
		if c != nil && (c.refresh.IsZero() || now.Before(c.refresh)) {
			return c.key, nil
		}
		valid := c != nil && (c.expires.IsZero() || now.Before(c.expires))
		s.mu.Lock()
		if c2 := s.cur.Load(); c2 != c { // refreshed meanwhile
			s.mu.Unlock()
			continue
		}
		if ch := s.refreshing; ch != nil {
			s.mu.Unlock()
			if valid {
				return c.key, nil
			}
			wctx, cancel := enforcedDeadline(ctx) // the call's time budget ends this wait
			select {
			case <-ch:
				cancel()
				now = time.Now()
				if s.cur.Load() == c { // that refresh failed: report it rather than retry at once
					s.mu.Lock()
					err := s.failure
					s.mu.Unlock()
					return "", err
				}
				continue
			case <-wctx.Done():
				cancel()
				return "", wctx.Err()
			}
		}
		if valid && !s.failedAt.IsZero() && now.Sub(s.failedAt) < keySourceRetry {
			s.mu.Unlock()
			return c.key, nil
		}
		ch := make(chan struct{})
		s.refreshing = ch
		s.mu.Unlock()

		fctx, cancel := enforcedDeadline(ctx) // the call's time budget ends a source that hangs
		next, err := s.fetch(fctx)
		cancel()

		s.mu.Lock()
		if err == nil {
			s.cur.Store(next)
			s.failedAt, s.failure = time.Time{}, nil
		} else {
			s.failedAt, s.failure = time.Now(), err
		}
		s.refreshing = nil
		close(ch)
		s.mu.Unlock()
		switch {
		case err == nil:
			return next.key, nil
		case valid:
			return c.key, nil
		default:
			return "", err
		}
	}
}

// fetch asks the source for a credential, once no other key of the source is asking it
// (within ctx). A panic in the source is returned as an error, so that the refresh is
// released for the next caller.
func (s *keySource) fetch(ctx context.Context) (c *credential, err error) {
	select {
	case s.gate <- struct{}{}:
		defer func() { <-s.gate }()
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", keysource.ErrFailed, ctx.Err())
	}
	defer func() {
		if v := recover(); v != nil {
			c, err = nil, fmt.Errorf("%w: the source panicked", keysource.ErrFailed)
		}
	}()
	key, expires, err := s.src.Key(ctx)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %w", keysource.ErrFailed, err)
	case key == "":
		return nil, fmt.Errorf("%w: it returned an empty key", keysource.ErrFailed)
	}
	c = &credential{key: key, expires: expires}
	if !expires.IsZero() {
		now := time.Now()
		lead := min(keysource.Refresh, expires.Sub(now)/2)
		c.refresh = expires.Add(-max(lead, 0))
	}
	return c, nil
}
