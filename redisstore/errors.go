package redisstore

import (
	"context"
	"errors"
	"time"
)

// ErrUnavailable is wrapped by every error a Store returns because Redis did not answer in
// time, refused the call or gave an answer the store cannot use. Under FailClosed each
// LimitState method returns such an error instead of admitting; a Client turns it into a
// refusal of class rate_limited that wraps both llmclient.ErrRateLimited and
// ErrUnavailable, and fails over to an upstream that does not use the store. Under
// FailOpen the methods admit locally instead, and no such error reaches the caller.
var ErrUnavailable = errors.New("redisstore: redis unavailable")

// errDown is returned without calling Redis while a recent failure keeps it alone.
var errDown error = &unavailableError{msg: "redisstore: redis unavailable after a recent failure"}

// errClosed is returned by AcquireSlot once the store is closed: nothing would renew a
// lease taken in Redis then.
var errClosed error = &unavailableError{msg: "redisstore: redis unavailable: the store is closed"}

// unavailableError is a call to Redis that failed. It wraps ErrUnavailable and the Redis
// client's error, except when that error is the context error of the store's own timeout:
// the caller's context is not done then, and errors.Is(err, context.DeadlineExceeded)
// must not tell the caller (or the Client, which hands context errors back unchanged)
// that it is.
type unavailableError struct {
	msg   string
	cause error // nil for the store's own timeout
}

func (e *unavailableError) Error() string { return e.msg }

func (e *unavailableError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrUnavailable}
	}
	return []error{ErrUnavailable, e.cause}
}

// unavailable returns the error of a call to Redis that failed with err after the store's
// timeout, or sooner.
func unavailable(err error, timeout time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &unavailableError{msg: "redisstore: redis unavailable: no answer within the store's timeout of " + timeout.String()}
	}
	return &unavailableError{msg: "redisstore: redis unavailable: " + err.Error(), cause: err}
}
