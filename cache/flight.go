package cache

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
)

// errAllGone cancels a shared call whose waiters have all gone.
var errAllGone = errors.New("llmclient/cache: every caller waiting for the shared call has gone")

// errWindowEnded cancels an idempotent call whose callers have been gone for the
// idempotency window.
var errWindowEnded = errors.New("llmclient/cache: the idempotency window ended with no caller waiting")

// ErrIdempotencyMismatch is wrapped by the failure.BadRequest *llmclient.Error of a call
// whose idempotency key was used, within the idempotency window, for a different request.
var ErrIdempotencyMismatch = errors.New("llmclient/cache: idempotency key reused for a different request")

// flightGroup holds the calls in flight by key. It is safe for concurrent use.
type flightGroup struct {
	mu sync.Mutex
	m  map[string]*flight
}

// flight is one upstream call that several callers wait for.
type flight struct {
	done        chan struct{}
	fingerprint string // the request's, for idempotency keys (its exact key for de-duplication)
	ctx         context.Context
	cancel      context.CancelCauseFunc

	// Guarded by the group's mutex. timer cancels a shared flight at the latest deadline
	// of its waiters, a detached one at the end of its window.
	waiters   int
	detached  bool          // idempotent: runs on for window when its waiters are gone
	window    time.Duration // of a detached flight
	timer     *time.Timer
	deadline  time.Time
	unbounded bool // a waiter without a deadline

	expired atomic.Bool // the timer canceled the call at the latest deadline

	// answered (guarded by the group's mutex) marks a call that answered and is storing
	// its answer: it stays in the group until it has, and a caller that joins it
	// meanwhile gets the answer at once.
	answered bool

	// Set before done is closed.
	resp     *llmclient.Response
	err      error
	panicked any
}

// flightMode says how a flight's context is bounded.
type flightMode struct {
	// detach > 0 makes an idempotent flight: not canceled by its waiters, it runs on for
	// detach once they are all gone (a waiter that joins meanwhile stops the clock). 0
	// makes a shared flight, canceled when its waiters are gone and at their latest
	// deadline.
	detach time.Duration
}

// flightFunc makes a shared call. It returns, with the call's result, what to do once
// the callers have it (store the answer), or nil.
type flightFunc func(context.Context) (*llmclient.Response, func(), error)

// do runs fn once for every caller of key in flight together and returns its result. It
// returns joined true for a caller that found the call in flight and got its result. A
// caller whose ctx ends returns at once with its context's error, without canceling the
// call for the others. fingerprint must match the fingerprint of the call in flight, else
// the caller gets an ErrIdempotencyMismatch error. fn runs on its own goroutine with the
// first caller's context values; what it leaves to do runs there too, after its callers
// got the result, and the call can be joined until it is done.
func (g *flightGroup) do(ctx context.Context, key, fingerprint string, mode flightMode, fn flightFunc) (*llmclient.Response, error, bool) {
	if ctx.Err() != nil { // a caller already gone starts nothing
		return nil, gaveUp(ctx), false
	}
	f, joined, err := g.join(ctx, key, fingerprint, mode, fn)
	if err != nil {
		return nil, err, true
	}
	return g.wait(ctx, f, joined)
}

// peek joins the flight in flight under key, if any, without starting one.
func (g *flightGroup) peek(ctx context.Context, key, fingerprint string) (*llmclient.Response, error, bool) {
	g.mu.Lock()
	f := g.m[key]
	if f == nil || !f.joinable() {
		g.mu.Unlock()
		return nil, nil, false
	}
	if f.fingerprint != fingerprint {
		g.mu.Unlock()
		return nil, mismatch(), true
	}
	f.waiters++
	f.extend(ctx)
	g.mu.Unlock()
	resp, err, _ := g.wait(ctx, f, true)
	return resp, err, true
}

func (g *flightGroup) join(ctx context.Context, key, fingerprint string, mode flightMode, fn flightFunc) (*flight, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if f := g.m[key]; f != nil && f.joinable() {
		if f.fingerprint != fingerprint {
			return nil, true, mismatch()
		}
		f.waiters++
		f.extend(ctx)
		return f, true, nil
	}
	if g.m == nil {
		g.m = make(map[string]*flight)
	}
	f := &flight{done: make(chan struct{}), fingerprint: fingerprint, waiters: 1}
	base := context.WithoutCancel(ctx)
	if mode.detach > 0 {
		f.detached, f.window = true, mode.detach
		f.ctx, f.cancel = context.WithCancelCause(base)
	} else {
		f.ctx, f.cancel = context.WithCancelCause(base)
		if d, ok := ctx.Deadline(); ok {
			f.deadline = d
			f.timer = time.AfterFunc(time.Until(d), func() { g.expire(f) })
		} else {
			f.unbounded = true
		}
	}
	g.m[key] = f
	go g.run(key, f, fn)
	return f, false, nil
}

// joinable reports whether a caller may join f: it has answered, or is still running.
// g.mu is held.
func (f *flight) joinable() bool { return f.answered || f.ctx.Err() == nil }

// extend makes a shared flight last as long as the new waiter's deadline, and stops the
// window of a detached one while it has a waiter. g.mu is held.
func (f *flight) extend(ctx context.Context) {
	if f.detached {
		if f.timer != nil {
			f.timer.Stop()
			f.timer = nil
		}
		return
	}
	if f.unbounded {
		return
	}
	d, ok := ctx.Deadline()
	if !ok {
		f.unbounded = true
		f.timer.Stop()
		return
	}
	if d.After(f.deadline) {
		f.deadline = d
		f.timer.Reset(time.Until(d))
	}
}

// expire cancels a shared flight at the latest deadline of its waiters, unless a waiter
// extended it or lifted it since the timer fired. It cancels under g.mu, so that no
// waiter joins a flight being canceled.
func (g *flightGroup) expire(f *flight) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if f.unbounded || time.Now().Before(f.deadline) {
		return
	}
	f.expired.Store(true)
	f.cancel(context.DeadlineExceeded)
}

// run makes the call, publishes its result, then does what the call left to do (stores
// the answer) while it may still be joined.
func (g *flightGroup) run(key string, f *flight, fn flightFunc) {
	defer func() {
		g.mu.Lock()
		if g.m[key] == f {
			delete(g.m, key)
		}
		if f.timer != nil {
			f.timer.Stop()
		}
		g.mu.Unlock()
		f.cancel(context.Canceled)
	}()
	var then func()
	func() {
		defer func() {
			if p := recover(); p != nil {
				f.panicked = p
			}
			g.mu.Lock()
			if then != nil {
				f.answered = true
			} else if g.m[key] == f { // nothing more to do: a caller that comes starts anew
				delete(g.m, key)
			}
			g.mu.Unlock()
			close(f.done)
		}()
		f.resp, then, f.err = fn(f.ctx)
	}()
	if then != nil {
		then()
	}
}

// wait waits for f's result or for ctx to end. It returns joined false for a caller that
// gave up: the shared call did not answer it.
func (g *flightGroup) wait(ctx context.Context, f *flight, joined bool) (*llmclient.Response, error, bool) {
	select {
	case <-f.done:
	case <-ctx.Done():
		select {
		case <-f.done: // both ready: the answer wins
		default:
			g.leave(f)
			return nil, gaveUp(ctx), false
		}
	}
	g.mu.Lock()
	f.waiters--
	g.mu.Unlock()
	if f.panicked != nil {
		panic(f.panicked)
	}
	if f.err != nil {
		switch {
		case ctx.Err() != nil: // the call failed as this caller gave up: its own reason
			return nil, gaveUp(ctx), false
		case f.expired.Load():
			return nil, &llmclient.Error{Class: failure.Timeout, Err: context.DeadlineExceeded,
				Message: "the shared call reached the latest deadline of its callers"}, joined
		}
	}
	return copyResponse(f.resp), f.err, joined
}

// leave drops one waiter; the last one out cancels a shared call (under g.mu, so that no
// waiter joins a flight being canceled), and starts the window of a detached one.
func (g *flightGroup) leave(f *flight) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f.waiters--
	switch {
	case f.waiters > 0:
	case f.detached:
		f.timer = time.AfterFunc(f.window, func() { g.closeWindow(f) })
	default:
		f.cancel(errAllGone)
	}
}

// closeWindow cancels a detached flight whose window ended, unless a waiter joined it
// meanwhile. It cancels under g.mu, so that no waiter joins a flight being canceled.
func (g *flightGroup) closeWindow(f *flight) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if f.waiters == 0 {
		f.cancel(errWindowEnded)
	}
}

// inFlight reports how many calls are in flight, for tests and stats.
func (g *flightGroup) inFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.m)
}

// copyResponse gives each waiter its own copy of a shared response.
func copyResponse(r *llmclient.Response) *llmclient.Response {
	if r == nil {
		return nil
	}
	c := *r
	c.ToolCalls = slices.Clone(r.ToolCalls)
	c.Attempts = slices.Clone(r.Attempts)
	return &c
}

func gaveUp(ctx context.Context) error {
	cause := context.Cause(ctx)
	class := failure.Canceled
	if errors.Is(cause, context.DeadlineExceeded) {
		class = failure.Timeout
	}
	return &llmclient.Error{Class: class, Message: "gave up waiting for a shared call", Err: cause}
}

func mismatch() error {
	return &llmclient.Error{Class: failure.BadRequest, Err: ErrIdempotencyMismatch}
}
