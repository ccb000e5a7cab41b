package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/llmclient/llmclient/limitstore"
)

// TestSlotReleaseDoesNotHoldCaller: the slot release after a call goes to Redis without
// holding the caller. A release that takes three quarters of the store's timeout used to
// keep a call whose deadline had passed (or not) waiting for it; the slot is still given
// back in Redis, and Close waits for that.
func TestSlotReleaseDoesNotHoldCaller(t *testing.T) {
	srv := startRedis(t)
	h := &slowHook{only: "release"}
	const timeout = 2 * time.Second
	st, rdb := slowStore(t, srv, h, timeout)
	c := slowClient(t, st, rdb)

	h.delay.Store(int64(3 * timeout / 4))
	call, cancel := context.WithTimeout(context.Background(), timeout/2)
	defer cancel()
	start := time.Now()
	_, err := c.Complete(call, hello())
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if took >= 3*timeout/8 {
		t.Errorf("the call returned after %v: it waited for the slot release (%v) past its deadline (%v)",
			took.Round(time.Millisecond), 3*timeout/4, timeout/2)
	}
	waitSlotsFree(t, rdb) // the slot is given back all the same
	if h.n.Load() != 1 {
		t.Fatalf("%d slot releases went to Redis, want 1", h.n.Load())
	}
}

// TestSlotWaiterLeavesWithoutHoldingCaller: a slot waiter whose context ends leaves the
// queue in Redis without holding its caller; the queue is still left.
func TestSlotWaiterLeavesWithoutHoldingCaller(t *testing.T) {
	srv := startRedis(t)
	spec := limitstore.Spec{MaxConcurrent: 1, BatchShare: 1}
	holder := srv.store().Open("leave", spec)
	l, _, err := holder.AcquireSlot(ctx(t), interactive, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.ReleaseSlot(l)

	h := &slowHook{only: "release"}
	const timeout = 2 * time.Second
	st, _ := slowStore(t, srv, h, timeout)
	h.delay.Store(int64(3 * timeout / 4))
	const deadline = 200 * time.Millisecond
	cc, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	_, _, err = st.Open("leave", spec).AcquireSlot(cc, interactive, -1)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a waiter whose deadline passed: %v", err)
	}
	if took >= deadline+timeout/4 {
		t.Errorf("the waiter returned %v after its deadline: it waited for leaving the queue (%v)",
			(took - deadline).Round(time.Millisecond), 3*timeout/4)
	}
	waitQueued(t, srv, "leave", 0)
}

// TestSlotFreeAfterOwnRelease: a slot released by this process is free for its next
// request that does not wait (a FailFast limiter), also when the release is on its way
// to Redis: a refusal waits for this process's releases on the scope, and asks again.
func TestSlotFreeAfterOwnRelease(t *testing.T) {
	srv := startRedis(t)
	spec := limitstore.Spec{MaxConcurrent: 1, BatchShare: 1}
	for _, d := range []time.Duration{0, 300 * time.Millisecond} {
		t.Run(d.String(), func(t *testing.T) {
			h := &slowHook{only: "release"}
			st, _ := slowStore(t, srv, h, 2*time.Second)
			s := st.Open("own/"+d.String(), spec)
			h.delay.Store(int64(d))
			n := 50
			if d > 0 {
				n = 3
			}
			for i := range n {
				l, _, err := s.AcquireSlot(ctx(t), interactive, 0)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				if l.ID == 0 {
					t.Fatalf("request %d: no lease", i)
				}
				s.ReleaseSlot(l)
			}
		})
	}
}
