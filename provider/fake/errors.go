package fake

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
)

var (
	// ErrExhausted is the cause of the error a Provider returns once its script has served
	// every step. The error is an *llmclient.Error of class failure.Unknown, so the Client
	// neither retries nor fails over and the test notices; match it with errors.Is.
	ErrExhausted = errors.New("fake: script exhausted")
	// ErrClosed is returned by a stream's Recv after Close.
	ErrClosed = errors.New("fake: read on closed stream")
)

// exhausted returns the error for a call past the end of a script that served n calls.
func exhausted(n int) error {
	return &llmclient.Error{
		Class: failure.Unknown,
		Err:   fmt.Errorf("%w after %d calls", ErrExhausted, n),
	}
}

// misuse returns the error for a call that met a malformed step.
func misuse(msg string) error {
	return &llmclient.Error{Class: failure.Unknown, Err: errors.New(msg)}
}

// ctxError wraps the context's error, and its cause when that differs, as a transport
// would: errors.Is finds context.Canceled or context.DeadlineExceeded, and the cause.
func ctxError(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("fake: %w: %w", err, cause)
	}
	return fmt.Errorf("fake: %w", err)
}

// sleep waits for d or until ctx is done, whichever comes first. It leaves no timer or
// goroutine behind.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctxError(ctx)
	}
}
