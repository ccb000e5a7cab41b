package redisstore

import (
	"sync/atomic"
	"time"
)

// health remembers whether Redis answers. After a failed call the store leaves Redis alone
// for the probe interval; then the first call to come along probes it, while the others
// keep to the fallback until the probe has answered. It is safe for concurrent use.
type health struct {
	interval time.Duration
	// downUntil is the unix-nano time before which Redis is not called; 0 while it answers.
	downUntil atomic.Int64
}

// allow reports whether a call may go to Redis now.
func (h *health) allow() bool {
	d := h.downUntil.Load()
	if d == 0 {
		return true
	}
	now := time.Now().UnixNano()
	if now < d {
		return false
	}
	// The first caller past the interval probes; the others wait for its answer.
	return h.downUntil.CompareAndSwap(d, now+int64(h.interval))
}

// up records a call that Redis answered, and reports whether Redis was down before.
func (h *health) up() bool {
	if h.downUntil.Load() == 0 {
		return false
	}
	h.downUntil.Store(0)
	return true
}

// down records a call that failed.
func (h *health) down() {
	h.downUntil.Store(time.Now().Add(h.interval).UnixNano())
}

// ok reports whether the last call answered.
func (h *health) ok() bool { return h.downUntil.Load() == 0 }
