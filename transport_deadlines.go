package llmclient

import (
	"context"
	"sync"
	"time"
)

// deadlines bounds a Transport's attempts with one timer between them, armed for the
// earliest deadline, instead of a timer per attempt: an attempt adds its deadline when it
// starts and removes it when it ends, which costs a lock and a heap operation rather than
// a timer's allocations and the runtime's timer heap. When the timer fires, the attempts
// whose deadline has passed are canceled with their cause and the timer is armed for the
// next deadline. An attempt that ends before its deadline leaves the timer as it is: it
// may fire early, and then only re-arms. The timer refers to the deadlines alone, in an
// allocation apart from the Transport, so that it never keeps its Transport in memory.
//
// It runs on the real clock only: an attempt whose clock has no monotonic reading (a
// testing/synctest bubble's) takes a timer of its own (usesShared), since a timer made in
// a bubble belongs to that bubble.
//
// A Transport has deadlineShards of them, so that attempts running at once mostly take
// different locks.
type deadlines struct {
	mu    sync.Mutex
	heap  []*deadline // by at, earliest first
	timer *time.Timer // nil until the first deadline
	armed time.Time   // when timer fires; zero when it is not armed
}

// deadlineShards is how many deadlines a Transport has.
const deadlineShards = 8

// deadline is one attempt's entry: when it ends, and how it is canceled then.
type deadline struct {
	at     time.Time
	cancel context.CancelCauseFunc
	cause  error
	i      int  // index in the heap; -1 once out of it
	fired  bool // canceled at its deadline (set under the lock)
}

// usesShared reports whether an attempt started at now is bounded by the shared timer:
// now has a monotonic clock reading, which the real clock always gives and a synctest
// bubble's fake clock never does.
func usesShared(now time.Time) bool { return now != now.Round(0) }

// add starts bounding e (at, cancel and cause set; e not in the heap).
func (d *deadlines) add(e *deadline) {
	d.mu.Lock()
	e.i, e.fired = len(d.heap), false
	d.heap = append(d.heap, e)
	d.up(e.i)
	if d.armed.IsZero() || e.at.Before(d.armed) {
		d.arm(e.at)
	}
	d.mu.Unlock()
}

// remove stops bounding e and reports whether its deadline had passed: then its cancel
// was called, or is being called, with its cause.
func (d *deadlines) remove(e *deadline) (fired bool) {
	d.mu.Lock()
	if e.i >= 0 {
		d.delete(e.i)
	}
	fired = e.fired
	d.mu.Unlock()
	return fired
}

// arm makes the timer fire at at. Called with the lock held.
func (d *deadlines) arm(at time.Time) {
	d.armed = at
	wait := time.Until(at)
	if d.timer == nil {
		d.timer = time.AfterFunc(wait, d.fire)
		return
	}
	d.timer.Reset(wait)
}

// fire is the timer's function: it cancels the attempts whose deadline has passed.
func (d *deadlines) fire() { d.expire(time.Now()) }

// expire cancels the entries whose deadline is at or before now, outside the lock, and
// arms the timer for the next one.
func (d *deadlines) expire(now time.Time) {
	type due struct {
		cancel context.CancelCauseFunc
		cause  error
	}
	var list []due
	d.mu.Lock()
	for len(d.heap) > 0 && !d.heap[0].at.After(now) {
		e := d.heap[0]
		e.fired = true
		list = append(list, due{e.cancel, e.cause})
		d.delete(0)
	}
	d.armed = time.Time{}
	if len(d.heap) > 0 {
		d.arm(d.heap[0].at)
	}
	d.mu.Unlock()
	for _, x := range list {
		x.cancel(x.cause)
	}
}

// delete takes the entry at i out of the heap. Called with the lock held.
func (d *deadlines) delete(i int) {
	h := d.heap
	last := len(h) - 1
	h[i].i = -1
	if i != last {
		h[i] = h[last]
		h[i].i = i
	}
	h[last] = nil
	d.heap = h[:last]
	if i != last {
		d.down(i)
		d.up(i)
	}
}

// up moves the entry at i towards the root while it is earlier than its parent.
func (d *deadlines) up(i int) {
	h := d.heap
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].at.Before(h[p].at) {
			return
		}
		h[i], h[p] = h[p], h[i]
		h[i].i, h[p].i = i, p
		i = p
	}
}

// down moves the entry at i towards the leaves while a child is earlier.
func (d *deadlines) down(i int) {
	h := d.heap
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if r := c + 1; r < len(h) && h[r].at.Before(h[c].at) {
			c = r
		}
		if !h[c].at.Before(h[i].at) {
			return
		}
		h[i], h[c] = h[c], h[i]
		h[i].i, h[c].i = i, c
		i = c
	}
}
