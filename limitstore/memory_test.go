package limitstore

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestMemoryStoreSharesNamedScopes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewMemory()
		spec := Spec{Requests: Rate{PerSecond: 1, Burst: 1}, BatchShare: 1}
		a, b := s.Open("key-1", spec), s.Open("key-1", spec)
		if g, _ := a.Reserve(t.Context(), Reservation{Requests: 1, MaxWait: -1}); !g.OK || g.Wait != 0 {
			t.Fatalf("first reservation: %+v", g)
		}
		if g, _ := b.Reserve(t.Context(), Reservation{Requests: 1, MaxWait: 0}); g.OK || g.Wait != time.Second {
			t.Fatalf("second reservation through the same name: %+v, want refused with 1s", g)
		}
		private := s.Open("", spec)
		if g, _ := private.Reserve(t.Context(), Reservation{Requests: 1, MaxWait: 0}); !g.OK {
			t.Fatal("a private scope shared state")
		}
	})
}

func TestMemoryStoreDropsIdleScopes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewMemory().(*memoryStore)
		spec := Spec{Requests: Rate{PerSecond: 1, Burst: 1}, MaxConcurrent: 1, BatchShare: 1}
		busy := s.Open("busy", spec)
		lease, _, err := busy.AcquireSlot(t.Context(), false, -1)
		if err != nil {
			t.Fatal(err)
		}
		for i := range memorySweepMin {
			st := s.Open(time.Duration(i).String(), spec)
			st.Reserve(t.Context(), Reservation{Requests: 1, MaxWait: -1})
		}
		time.Sleep(2 * time.Second) // every bucket is full again
		s.mu.Lock()
		swept := s.sweepAt > 0 // the store reached its sweep size once already
		s.sweepAt = 0          // and sweeps at the next Open
		s.mu.Unlock()
		s.Open("trigger", spec)
		if !swept {
			t.Fatal("no sweep was scheduled")
		}
		if len(s.scopes) != 2 || s.scopes["busy"] == nil {
			t.Fatalf("%d scopes kept, want busy and trigger", len(s.scopes))
		}
		busy.ReleaseSlot(lease)
	})
}

func TestMemStateBucketArithmetic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		// 10 tokens per second, bucket 10.
		st := newMemState(Spec{Tokens: Rate{PerSecond: 10, Burst: 10}, BatchShare: 1})
		reserve := func(n int) time.Duration {
			g, err := st.Reserve(ctx, Reservation{Tokens: n, MaxWait: -1})
			if !g.OK || err != nil {
				t.Fatal(g, err)
			}
			return g.Wait
		}
		if w := reserve(10); w != 0 {
			t.Fatalf("full bucket: wait %v", w)
		}
		if w := reserve(5); w != 500*time.Millisecond {
			t.Fatalf("empty bucket, 5 tokens: wait %v, want 500ms", w)
		}
		// Give back more than was taken: the bucket holds at most its burst.
		st.Adjust(ctx, LaneMain, 0, -1000)
		if w := reserve(10); w != 0 {
			t.Fatalf("after a refund: wait %v", w)
		}
		if w := reserve(1); w != 100*time.Millisecond {
			t.Fatalf("refund above the burst was kept: wait %v, want 100ms", w)
		}
		// Pause delays the main lane only.
		time.Sleep(10 * time.Second)
		st.Pause(ctx, 3*time.Second)
		st.Pause(ctx, time.Second) // a shorter pause does not shorten it
		if b, _ := st.Blocked(ctx); b != (Block{Paused: 3 * time.Second}) {
			t.Fatalf("Blocked %+v, want a 3s pause and no eviction", b)
		}
		if w := reserve(1); w != 3*time.Second {
			t.Fatalf("paused: wait %v", w)
		}
	})
}

func TestMemStateSlotsFIFOAndBatchCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		st := newMemState(Spec{MaxConcurrent: 2, BatchShare: 0.5}) // batch: 1 slot
		b1, _, err := st.AcquireSlot(ctx, true, -1)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.AcquireSlot(ctx, true, 0); !errors.Is(err, ErrRefused) {
			t.Fatalf("second batch slot: %v, want refused", err)
		}
		i1, _, err := st.AcquireSlot(ctx, false, 0)
		if err != nil {
			t.Fatalf("interactive slot beside batch: %v", err)
		}
		// Two interactive waiters queue in order; a release grants the first.
		order := make(chan int, 2)
		for i := range 2 {
			go func() {
				l, _, err := st.AcquireSlot(ctx, false, -1)
				if err != nil {
					t.Error(err)
					return
				}
				order <- i
				time.Sleep(time.Second)
				st.ReleaseSlot(l)
			}()
			time.Sleep(time.Millisecond)
		}
		st.ReleaseSlot(i1)
		if first := <-order; first != 0 {
			t.Fatalf("waiter %d served first", first)
		}
		st.ReleaseSlot(b1)
		<-order
		// A waiter that gives up leaves the queue.
		c, cancel := context.WithCancel(ctx)
		held, _, _ := st.AcquireSlot(ctx, false, -1)
		held2, _, _ := st.AcquireSlot(ctx, false, -1)
		go func() { time.Sleep(time.Second); cancel() }()
		if _, waited, err := st.AcquireSlot(c, false, -1); !errors.Is(err, context.Canceled) || waited != time.Second {
			t.Fatalf("canceled waiter: %v after %v", err, waited)
		}
		st.mu.Lock()
		n := len(st.waiters)
		st.mu.Unlock()
		if n != 0 {
			t.Fatalf("%d waiters left after cancel", n)
		}
		st.ReleaseSlot(held)
		st.ReleaseSlot(held2)
		if st.inUse != 0 || st.batchInUse != 0 {
			t.Fatalf("slots in use after all releases: %d %d", st.inUse, st.batchInUse)
		}
	})
}
