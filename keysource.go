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

// keySourceWait bounds how long callers wait for one refresh of a source: once a refresh
// has run this long, callers stop waiting for it (those with an expired credential fail
// at once with keysource.ErrFailed) while it goes on, and its result is used when the
// source returns.
const keySourceWait = time.Minute

// keySource caches a keysource.Source's credential and refreshes it, one refresh at a
// time, on a goroutine of its own that the callers wait for within their context and
// keySourceWait: a source that ignores its context holds that goroutine, not a call.
type keySource struct {
	src keysource.Source
	cur atomic.Pointer[credential]
	// gate is held while src.Key runs. The keys of one source share it (see sourceGate):
	// a source listed twice, or removed by Client.Update while it fetched and then set
	// again, has two keySources, which call it one after the other.
	gate chan struct{}

	mu         sync.Mutex
	refreshing chan struct{} // non-nil while a refresh runs; closed when it is done
	started    time.Time     // when the running refresh started
	failedAt   time.Time     // the last failed refresh
	failure    error
}

// errKeySourceStuck is the error of a caller that needs a refresh that has run longer
// than keySourceWait.
var errKeySourceStuck = fmt.Errorf("%w: its refresh has run for over %v", keysource.ErrFailed, keySourceWait)

// get returns the credential to call with now: the current one, unless it is within its
// refresh window (then this caller starts a refresh and waits for it, unless another runs
// or one failed just before) or expired (then it waits for a refresh). A wait ends with
// the refresh, with ctx (the call's time budget included) or keySourceWait after the
// refresh started, whichever is first; a caller that stops waiting while its credential
// is still valid goes on with it.
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
		ch := s.refreshing
		if ch != nil {
			if valid {
				s.mu.Unlock()
				return c.key, nil
			}
		} else {
			if valid && !s.failedAt.IsZero() && now.Sub(s.failedAt) < keySourceRetry {
				s.mu.Unlock()
				return c.key, nil
			}
			ch = make(chan struct{})
			s.refreshing, s.started = ch, time.Now()
			// The call's time budget ends a source that honours its context; the fetch
			// outlives this caller when the source does not.
			fctx, cancel := enforcedDeadline(ctx)
			go s.refresh(fctx, cancel, ch)
		}
		left := keySourceWait - time.Since(s.started)
		s.mu.Unlock()
		if left <= 0 {
			if valid {
				return c.key, nil
			}
			return "", errKeySourceStuck
		}
		wctx, cancel := enforcedDeadline(ctx) // the call's time budget ends this wait
		t := time.NewTimer(left)
		select {
		case <-ch:
			t.Stop()
			cancel()
			if n := s.cur.Load(); n != c { // refreshed
				return n.key, nil
			}
			if valid { // that refresh failed: keep the current credential
				return c.key, nil
			}
			s.mu.Lock() // that refresh failed: report it rather than retry at once
			err := s.failure
			s.mu.Unlock()
			return "", err
		case <-t.C:
			cancel()
			if valid {
				return c.key, nil
			}
			return "", errKeySourceStuck
		case <-wctx.Done():
			t.Stop()
			cancel()
			return "", wctx.Err()
		}
	}
}

// refresh fetches a credential within ctx, then cancels ctx, records the outcome and
// closes ch.
func (s *keySource) refresh(ctx context.Context, cancel context.CancelFunc, ch chan struct{}) {
	next, err := s.fetch(ctx)
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
