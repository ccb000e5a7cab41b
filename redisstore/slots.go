package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/llmclient/llmclient/limitstore"
)

// localBit marks the ids of slot leases taken from the local fallback; Redis leases
// never have it.
const localBit = 1 << 63

// errNoSlot is returned when no concurrency slot came free in time.
var errNoSlot = fmt.Errorf("%w: no concurrency slot free", limitstore.ErrRefused)

// member is a lease's or waiter's name in the scope's sorted sets.
func member(id uint64, batch bool) string {
	p := "m"
	if batch {
		p = "b"
	}
	return p + strconv.FormatUint(id, 36)
}

// AcquireSlot implements limitstore.State. The slot is a lease in Redis that this
// process renews while it holds it; a waiter queues in Redis in arrival order and polls,
// and a slot released by this process wakes its waiters at once. Once the store is
// closed it takes no lease in Redis (see Close).
func (st *state) AcquireSlot(ctx context.Context, batch bool, maxWait time.Duration) (limitstore.SlotLease, time.Duration, error) {
	if st.spec.MaxConcurrent <= 0 {
		return limitstore.SlotLease{}, 0, nil
	}
	id := (rand.Uint64() &^ localBit) | 1
	m := member(id, batch)
	op := "try"
	if maxWait != 0 {
		op = "wait"
	}
	start := time.Now()
	var (
		wake       chan struct{}
		unregister func()
		timer      *time.Timer
		poll       = pollMin
	)
	defer func() {
		if unregister != nil {
			unregister()
		}
		if timer != nil {
			timer.Stop()
		}
	}()
	for queued := false; ; queued = true {
		if st.s.closed.Load() {
			if queued { // closed while waiting: leave the queue, handing on a slot granted meanwhile
				st.leave(ctx, m, errClosed)
			}
			return st.slotFallback(ctx, errClosed, batch, maxWait, start, limitstore.SlotLease{ID: id, Batch: batch})
		}
		v, err := st.s.run(ctx, slotScript, st.slotKeys, op, m,
			st.slotArgs[0], st.slotArgs[1], st.slotArgs[2], st.slotArgs[3])
		if err != nil {
			return st.slotFallback(ctx, err, batch, maxWait, start, limitstore.SlotLease{ID: id, Batch: batch})
		}
		if n, _ := v.(int64); n == 1 {
			st.hold(id, batch)
			return limitstore.SlotLease{ID: id, Batch: batch}, time.Since(start), nil
		}
		if op == "try" {
			return limitstore.SlotLease{}, 0, errNoSlot
		}
		if unregister == nil {
			wake, unregister = st.s.waiter(st.name)
		}
		d := poll
		poll = min(2*poll, pollMax)
		if maxWait > 0 {
			left := maxWait - time.Since(start)
			if left <= 0 {
				return limitstore.SlotLease{}, time.Since(start), st.leave(ctx, m, errNoSlot)
			}
			d = min(d, left)
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
		case <-wake:
			poll = pollMin
		case <-ctx.Done():
			return limitstore.SlotLease{}, time.Since(start), st.leave(ctx, m, ctx.Err())
		}
	}
}

// leave takes a waiter that gives up out of the queue, handing on a slot granted to it
// meanwhile, and returns why it gave up. Should Redis fail, the waiter's entry expires.
func (st *state) leave(ctx context.Context, m string, why error) error {
	_, _ = st.s.run(context.WithoutCancel(ctx), slotScript, st.slotKeys, "release", m,
		st.slotArgs[0], st.slotArgs[1], st.slotArgs[2], st.slotArgs[3])
	st.s.notify(st.name)
	return why
}

// slotFallback handles a failed slot call: under FailOpen it waits for a slot of the
// local fallback for what is left of maxWait; otherwise it returns the refusal or the
// context's error. A call that failed may still take effect in Redis (a frozen server
// runs it when it wakes up), so the lease is given back: at once when the caller gave up,
// else once Redis answers again.
func (st *state) slotFallback(ctx context.Context, err error, batch bool, maxWait time.Duration,
	start time.Time, lease limitstore.SlotLease) (limitstore.SlotLease, time.Duration, error) {
	switch {
	case err == errClosed: // no lease was taken in Redis, or the queue was left already
	case errors.Is(err, ErrUnavailable):
		if err != errDown {
			st.retryRelease(lease)
		}
	default:
		st.leave(ctx, member(lease.ID, lease.Batch), err)
	}
	loc, err := st.fallback(err)
	if loc == nil {
		return limitstore.SlotLease{}, time.Since(start), err
	}
	left := maxWait
	if maxWait > 0 {
		left = max(maxWait-time.Since(start), 0)
	}
	lease, _, err = loc.AcquireSlot(ctx, batch, left)
	if err != nil {
		return limitstore.SlotLease{}, time.Since(start), err
	}
	lease.ID |= localBit
	return lease, time.Since(start), nil
}

// ReleaseSlot implements limitstore.State. A lease that cannot be released in Redis
// now is released when Redis answers again, or expires there within the lease TTL.
func (st *state) ReleaseSlot(lease limitstore.SlotLease) {
	if st.spec.MaxConcurrent <= 0 {
		return
	}
	if lease.ID&localBit != 0 {
		lease.ID &^= localBit
		st.s.local.Open(st.name, st.local).ReleaseSlot(lease)
		return
	}
	st.drop(lease.ID)
	if err := st.release(context.Background(), lease); err != nil {
		st.retryRelease(lease)
	}
}

// release gives a Redis lease back and wakes this process's waiters.
func (st *state) release(ctx context.Context, lease limitstore.SlotLease) error {
	_, err := st.s.run(ctx, slotScript, st.slotKeys, "release", member(lease.ID, lease.Batch),
		st.slotArgs[0], st.slotArgs[1], st.slotArgs[2], st.slotArgs[3])
	if err == nil {
		st.s.notify(st.name)
	}
	return err
}
