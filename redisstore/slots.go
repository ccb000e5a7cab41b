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

// localLease is a slot lease of the local fallback that a caller holds: the scope's name
// and the lease the fallback gave.
type localLease struct {
	name  string
	lease limitstore.SlotLease
}

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
	// Give-backs of this process on the scope that were on their way when a try was sent
	// (those numbered below gaveBy), which may have reached Redis after it: a refused try
	// waits for them and asks once more.
	var (
		gaveBy  uint64
		settled = op != "try"
	)
	for queued := false; ; queued = op == "wait" {
		if st.s.closed.Load() {
			if queued { // closed while waiting: leave the queue, handing on a slot granted meanwhile
				st.leave(m, errClosed)
			}
			return st.slotFallback(ctx, errClosed, batch, maxWait, start, limitstore.SlotLease{ID: id, Batch: batch})
		}
		if !settled {
			gaveBy = st.givingBelow()
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
			// A slot this process gave back before it asked may have been on its way
			// to Redis: wait for that, and ask once more.
			if !settled && gaveBy > 0 {
				settled = true
				select {
				case <-st.givenBack(gaveBy):
					continue
				case <-ctx.Done():
					return limitstore.SlotLease{}, time.Since(start), ctx.Err()
				}
			}
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
				return limitstore.SlotLease{}, time.Since(start), st.leave(m, errNoSlot)
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
			return limitstore.SlotLease{}, time.Since(start), st.leave(m, ctx.Err())
		}
	}
}

// leave takes a waiter that gives up out of the queue, handing on a slot granted to it
// meanwhile, without holding it (giveBack), and returns why it gave up. Should Redis
// fail, the waiter's entry expires.
func (st *state) leave(m string, why error) error {
	st.giveBack(func(ctx context.Context) {
		_, _ = st.s.run(ctx, slotScript, st.slotKeys, "release", m,
			st.slotArgs[0], st.slotArgs[1], st.slotArgs[2], st.slotArgs[3])
		st.s.notify(st.name)
	})
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
		st.leave(member(lease.ID, lease.Batch), err)
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
	return st.s.holdLocal(st.name, lease), time.Since(start), nil
}

// holdLocal records a slot lease the local fallback gave for the named scope and returns
// the lease to hand the caller: a random id of the store's own, with localBit, as the
// fallback numbers its leases per scope from 1 again once a scope idle is dropped.
func (s *Store) holdLocal(name string, lease limitstore.SlotLease) limitstore.SlotLease {
	s.localMu.Lock()
	defer s.localMu.Unlock()
	if s.localHeld == nil {
		s.localHeld = make(map[uint64]localLease)
	}
	for {
		id := rand.Uint64() | localBit
		if _, taken := s.localHeld[id]; !taken {
			s.localHeld[id] = localLease{name: name, lease: lease}
			return limitstore.SlotLease{ID: id, Batch: lease.Batch}
		}
	}
}

// dropLocal returns the local fallback's lease behind id, forgetting it; false when the
// store holds none by that id (released before).
func (s *Store) dropLocal(id uint64) (localLease, bool) {
	s.localMu.Lock()
	defer s.localMu.Unlock()
	l, ok := s.localHeld[id]
	if ok {
		delete(s.localHeld, id)
	}
	return l, ok
}

// ReleaseSlot implements limitstore.State. It does not wait for Redis: the lease is
// given back there in the background (giveBack), within the store's timeout, and this
// process's requests that find no slot free wait for that before they give up. A lease
// that cannot be released in Redis then is released when Redis answers again, or
// expires there within the lease TTL.
//
// Releasing a lease again is a no-op: neither Redis nor the local fallback counts a slot
// freed twice, which would let one more caller in than the bound allows.
func (st *state) ReleaseSlot(lease limitstore.SlotLease) {
	if st.spec.MaxConcurrent <= 0 {
		return
	}
	if lease.ID&localBit != 0 {
		if l, ok := st.s.dropLocal(lease.ID); ok {
			st.s.local.Open(l.name, st.local).ReleaseSlot(l.lease)
		}
		return
	}
	if !st.drop(lease.ID) {
		return // released before: its release is done, on its way, or retried (unreleased)
	}
	st.giveBack(func(ctx context.Context) {
		if err := st.release(ctx, lease); err != nil {
			st.retryRelease(lease)
		}
	})
}

// giveBack runs f, a call to Redis that gives back what a caller is done with (its slot,
// its place in the slot queue), without holding that caller: a caller whose deadline
// passed, or a slow Redis, must not keep it waiting once it has what it came for. f runs
// in a goroutine of its own, bounded by the store's timeout as every call is, which Close
// waits for; once the store is closing, it runs before giveBack returns. A request of
// this process for a slot of the scope that was sent while f was on its way, and found
// none free, waits for f and asks again (AcquireSlot).
func (st *state) giveBack(f func(context.Context)) {
	s := st.s
	n := st.giving1()
	s.givingMu.Lock()
	if s.closing {
		s.givingMu.Unlock()
		f(context.Background())
		st.gave(n)
		return
	}
	s.giving.Add(1)
	s.givingMu.Unlock()
	go func() {
		defer s.giving.Done()
		defer st.gave(n)
		f(context.Background())
	}()
}

// settleWait is a slot request waiting for the give-backs numbered below before.
type settleWait struct {
	before uint64
	ch     chan struct{}
}

// giving1 numbers a give-back on its way.
func (st *state) giving1() uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.giving == nil {
		st.giving = make(map[uint64]struct{})
	}
	n := st.gaveNext
	st.gaveNext++
	st.giving[n] = struct{}{}
	st.givingN.Add(1)
	return n
}

// givingBelow returns the number that the next give-back will take when one is on its
// way, 0 when none is: the give-backs a request sent now may miss are those below it.
func (st *state) givingBelow() uint64 {
	if st.givingN.Load() == 0 {
		return 0 // the usual case: no lock
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.gaveNext
}

// gave records that give-back n is done, and wakes the slot requests that wait for no
// give-back before theirs any more.
func (st *state) gave(n uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.giving, n)
	st.givingN.Add(-1)
	if len(st.settling) == 0 {
		return
	}
	low := st.lowestGivingLocked()
	keep := st.settling[:0]
	for _, w := range st.settling {
		if w.before <= low {
			close(w.ch)
		} else {
			keep = append(keep, w)
		}
	}
	clear(st.settling[len(keep):])
	st.settling = keep
}

// lowestGivingLocked returns the lowest number of a give-back on its way, gaveNext when
// none is. st.mu is held.
func (st *state) lowestGivingLocked() uint64 {
	low := st.gaveNext
	for m := range st.giving {
		low = min(low, m)
	}
	return low
}

// givenBack returns a channel closed once the give-backs numbered below before are done
// (at once when they are).
func (st *state) givenBack(before uint64) <-chan struct{} {
	st.mu.Lock()
	defer st.mu.Unlock()
	ch := make(chan struct{})
	if before <= st.lowestGivingLocked() {
		close(ch)
		return ch
	}
	st.settling = append(st.settling, settleWait{before: before, ch: ch})
	return ch
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
