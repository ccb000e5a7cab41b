package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/redisstore"
)

// TestSlotDoubleReleaseInRedis: releasing a Redis slot lease twice frees one slot, not
// two, and sends one release to Redis: the second release is a no-op.
func TestSlotDoubleReleaseInRedis(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.client()
	h := &slowHook{only: "release"}
	h.delay.Store(1) // no real delay: h counts the releases that go to Redis
	s, _ := slowStore(t, srv, h, 3*time.Second)
	spec := limitstore.Spec{MaxConcurrent: 2, BatchShare: 1}
	st := s.Open("twice", spec)
	a, _, err := st.AcquireSlot(ctx(t), interactive, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := st.AcquireSlot(ctx(t), interactive, 0)
	if err != nil {
		t.Fatal(err)
	}
	st.ReleaseSlot(a)
	st.ReleaseSlot(a)
	s.Close() // waits for the releases on their way
	if n := h.n.Load(); n != 1 {
		t.Errorf("%d releases went to Redis for one lease released twice, want 1", n)
	}
	if n, err := rdb.ZCard(ctx(t), "{llmclient:twice}:s").Result(); err != nil || n != 1 {
		t.Fatalf("%d leases in Redis, %v; want 1", n, err)
	}
	other := srv.store().Open("twice", spec)
	c, _, err := other.AcquireSlot(ctx(t), interactive, 0)
	if err != nil {
		t.Fatalf("the slot released (twice) did not come back: %v", err)
	}
	defer other.ReleaseSlot(c)
	if _, _, err := other.AcquireSlot(ctx(t), interactive, 0); !errors.Is(err, limitstore.ErrRefused) {
		t.Fatalf("a third slot of two after a double release: %v, want ErrRefused", err)
	}
	st.ReleaseSlot(b)
	st.ReleaseSlot(b)
	if n, err := rdb.ZCard(ctx(t), "{llmclient:twice}:s").Result(); err != nil || n != 1 {
		t.Fatalf("%d leases in Redis after b was released twice, %v; want c's alone", n, err)
	}
}

// TestSlotDoubleReleaseLocal: under FailOpen with Redis away, a slot of the local
// fallback released twice frees one slot, not two. The local store counts slots in use,
// so a second release used to free another caller's slot and let one more in than the
// local share allows.
func TestSlotDoubleReleaseLocal(t *testing.T) {
	srv := startRedis(t)
	s := srv.store(redisstore.WithTimeout(50*time.Millisecond), redisstore.WithLocalShare(0.5))
	st := s.Open("local-twice", limitstore.Spec{MaxConcurrent: 4, BatchShare: 1}) // 2 locally
	srv.stop()
	a, _, err := st.AcquireSlot(ctx(t), interactive, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := st.AcquireSlot(ctx(t), interactive, 0)
	if err != nil {
		t.Fatal(err)
	}
	st.ReleaseSlot(a)
	st.ReleaseSlot(a)
	var held []limitstore.SlotLease
	for range 3 {
		if l, _, err := st.AcquireSlot(ctx(t), interactive, 0); err == nil {
			held = append(held, l)
		}
	}
	if len(held) != 1 {
		t.Errorf("after a slot of two was released twice, %d of 3 more were given, want 1", len(held))
	}
	for _, l := range held {
		st.ReleaseSlot(l)
	}
	st.ReleaseSlot(b)
}
