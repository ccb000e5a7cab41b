package llmclient

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// KeySource supplies a credential that changes over time: an OAuth access token (Vertex
// AI), an Azure Entra ID token, a key read from a secret manager. Key returns the current
// credential and when it expires; a zero expiry means it does not expire, and the Client
// keeps it for the life of the pool (Client.Update with a new source replaces it).
//
// The Client calls Key on the goroutine of the call that needs a credential, with that
// call's context: the first call, and later the first call that finds the credential
// within its refresh window (see KeySourceRefresh) while the others go on with the
// current one. Key must be safe for concurrent use, although the Client never calls one
// source twice at once. A credential is never logged or put in an error, an event or a
// formatted Upstream; an upstream's error message that echoes it is redacted like a
// static key's.
type KeySource interface {
	Key(ctx context.Context) (key string, expires time.Time, err error)
}

// KeyFunc adapts a function to KeySource.
type KeyFunc func(ctx context.Context) (key string, expires time.Time, err error)

// Key calls f.
func (f KeyFunc) Key(ctx context.Context) (string, time.Time, error) { return f(ctx) }

// KeySourceRefresh is how long before its expiry a source's credential is refreshed: 5
// minutes, or half the credential's lifetime when that is shorter. A refresh that fails
// keeps the current credential until it expires, trying again at most once per
// keySourceRetry; an expired credential whose refresh fails makes the attempt fail with
// ClassUnavailable (ErrNoKey), which fails over like every key of the upstream being out.
const KeySourceRefresh = 5 * time.Minute

// keySourceRetry spaces the refresh attempts of a source that failed while its current
// credential is still valid.
const keySourceRetry = time.Second

// ErrKeySource is wrapped by the error of an attempt whose key source returned an error
// or an empty key, with no valid credential left.
var ErrKeySource = errors.New("llmclient: key source failed")

// credential is a value a source returned, with its expiry and the time to refresh it.
type credential struct {
	key              string
	expires, refresh time.Time // zero: never
}

// keySource caches a KeySource's credential and refreshes it, one caller at a time.
type keySource struct {
	src KeySource
	cur atomic.Pointer[credential]

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
			select {
			case <-ch:
				now = time.Now()
				if s.cur.Load() == c { // that refresh failed: report it rather than retry at once
					s.mu.Lock()
					err := s.failure
					s.mu.Unlock()
					return "", err
				}
				continue
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		if valid && !s.failedAt.IsZero() && now.Sub(s.failedAt) < keySourceRetry {
			s.mu.Unlock()
			return c.key, nil
		}
		ch := make(chan struct{})
		s.refreshing = ch
		s.mu.Unlock()

		next, err := s.fetch(ctx)

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

// fetch asks the source for a credential. A panic in the source is returned as an error,
// so that the refresh is released for the next caller.
func (s *keySource) fetch(ctx context.Context) (c *credential, err error) {
	defer func() {
		if v := recover(); v != nil {
			c, err = nil, fmt.Errorf("%w: the source panicked", ErrKeySource)
		}
	}()
	key, expires, err := s.src.Key(ctx)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrKeySource, err)
	case key == "":
		return nil, fmt.Errorf("%w: it returned an empty key", ErrKeySource)
	}
	c = &credential{key: key, expires: expires}
	if !expires.IsZero() {
		now := time.Now()
		lead := min(KeySourceRefresh, expires.Sub(now)/2)
		c.refresh = expires.Add(-max(lead, 0))
	}
	return c, nil
}
