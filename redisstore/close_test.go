package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/redisstore"
)

// TestSlotsAfterClose: a closed store renews no lease, so it must not take one in Redis
// either: such a lease would expire while its request runs, and another process would
// take the slot, breaking the concurrency bound. After Close, AcquireSlot acts as if
// Redis were away (FailOpen takes a local slot, FailClosed refuses with ErrUnavailable),
// and a slot taken before Close is still given back to Redis at once.
func TestSlotsAfterClose(t *testing.T) {
	for _, mode := range []redisstore.FailMode{redisstore.FailOpen, redisstore.FailClosed} {
		t.Run(mode.String(), func(t *testing.T) {
			srv := startRedis(t)
			rdb := srv.client()
			s := srv.store(redisstore.WithFailMode(mode))
			spec := limitstore.Spec{MaxConcurrent: 2, BatchShare: 1}
			st := s.Open("closing", spec)
			before, _, err := st.AcquireSlot(ctx(t), interactive, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			l, _, err := st.AcquireSlot(ctx(t), interactive, 0)
			switch {
			case mode == redisstore.FailClosed && !errors.Is(err, redisstore.ErrUnavailable):
				t.Fatalf("AcquireSlot after Close: %v, want ErrUnavailable", err)
			case mode == redisstore.FailOpen && err != nil:
				t.Fatalf("AcquireSlot after Close: %v, want a local slot", err)
			}
			if n, err := rdb.ZCard(ctx(t), "{llmclient:closing}:s").Result(); err != nil || n != 1 {
				t.Fatalf("%d leases in Redis after Close, %v; want only the one taken before", n, err)
			}
			if err == nil {
				st.ReleaseSlot(l)
			}
			st.ReleaseSlot(before)
			if n, err := rdb.ZCard(ctx(t), "{llmclient:closing}:s").Result(); err != nil || n != 0 {
				t.Fatalf("%d leases in Redis after releasing, %v; want none", n, err)
			}
		})
	}
}

// TestCloseWithWaiter: a slot waiter queued in Redis when its store closes leaves the
// queue and returns ErrUnavailable (FailClosed), instead of waiting on and then holding a
// lease that nothing renews.
func TestCloseWithWaiter(t *testing.T) {
	srv := startRedis(t)
	spec := limitstore.Spec{MaxConcurrent: 1, BatchShare: 1}
	holder := srv.store().Open("closing", spec)
	l, _, err := holder.AcquireSlot(ctx(t), interactive, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.ReleaseSlot(l)
	s := srv.store(redisstore.WithFailMode(redisstore.FailClosed))
	got := make(chan error, 1)
	go func() {
		_, _, err := s.Open("closing", spec).AcquireSlot(ctx(t), interactive, -1)
		got <- err
	}()
	waitQueued(t, srv, "closing", 1)
	s.Close()
	if err := <-got; !errors.Is(err, redisstore.ErrUnavailable) {
		t.Fatalf("the waiter of a closed store: %v, want ErrUnavailable", err)
	}
	waitQueued(t, srv, "closing", 0)
}

// TestCloseWhileRedisDown: with Redis known to be down, Close does not wait on it: the
// releases given back then fail at once (they are retried, or expire, in Redis), so Close
// returns well within the store's timeout, whatever that is.
func TestCloseWhileRedisDown(t *testing.T) {
	srv := startRedis(t)
	const timeout = 10 * time.Second
	s := srv.store(redisstore.WithTimeout(timeout), redisstore.WithLeaseTTL(3*timeout),
		redisstore.WithProbeInterval(time.Hour))
	st := s.Open("down", limitstore.Spec{MaxConcurrent: 2, BatchShare: 1})
	l, _, err := st.AcquireSlot(ctx(t), interactive, 0)
	if err != nil {
		t.Fatal(err)
	}
	srv.stop()
	if _, err := st.Blocked(ctx(t)); err != nil { // FailOpen: answered locally, Redis marked down
		t.Fatal(err)
	}
	if s.Healthy() {
		t.Fatal("the store did not mark Redis down")
	}
	start := time.Now()
	st.ReleaseSlot(l)
	s.Close()
	if took := time.Since(start); took > timeout/4 {
		t.Fatalf("Close with Redis down took %v (timeout %v)", took, timeout)
	}
}
