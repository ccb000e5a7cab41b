package redisstore_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/redisstore"
)

const (
	interactive = llmclient.PriorityInteractive
	batch       = llmclient.PriorityBatch
)

func TestSlotsAcrossStores(t *testing.T) {
	srv := startRedis(t)
	spec := llmclient.LimitSpec{MaxConcurrent: 2, BatchShare: 0.5} // one batch slot
	a, b, c := srv.store().Open("k", spec), srv.store().Open("k", spec), srv.store().Open("k", spec)

	la, _, err := a.AcquireSlot(ctx(t), interactive, 0)
	if err != nil {
		t.Fatal(err)
	}
	lb, _, err := b.AcquireSlot(ctx(t), batch, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.AcquireSlot(ctx(t), interactive, 0); !errors.Is(err, llmclient.ErrRateLimited) {
		t.Fatalf("a third slot: %v, want ErrRateLimited", err)
	}
	// A waiter whose wait runs out leaves the queue.
	start := time.Now()
	if _, w, err := c.AcquireSlot(ctx(t), interactive, 100*time.Millisecond); !errors.Is(err, llmclient.ErrRateLimited) ||
		w < 100*time.Millisecond || time.Since(start) > 400*time.Millisecond {
		t.Fatalf("waiting 100ms: %v after %v, want ErrRateLimited after 100ms", err, w)
	}
	// So does a canceled one.
	cc, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, _, err := c.AcquireSlot(cc, interactive, -1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("canceled wait: %v", err)
	}

	// Waiters are served in arrival order across stores, but batch never holds more than
	// its share: the batch waiter queues first, yet only the batch slot coming free lets it
	// in, so the interactive waiter behind it takes the main slot that frees first.
	type got struct {
		who   string
		lease llmclient.SlotLease
		err   error
	}
	done := make(chan got, 2)
	wait := func(who string, s llmclient.LimitState, p llmclient.Priority) {
		l, _, err := s.AcquireSlot(context.Background(), p, 5*time.Second)
		done <- got{who, l, err}
	}
	go wait("batch", c, batch)
	waitQueued(t, srv, "k", 1)
	go wait("interactive", b, interactive)
	waitQueued(t, srv, "k", 2)

	start = time.Now()
	a.ReleaseSlot(la) // a main slot: the batch waiter may not take it (batch holds its one slot)
	g := <-done
	if g.err != nil || g.who != "interactive" {
		t.Fatalf("after a main slot came free: %s got %v, want the interactive waiter", g.who, g.err)
	}
	if d := time.Since(start); d > 300*time.Millisecond {
		t.Errorf("the waiter in another process took %v to notice the free slot", d)
	}
	b.ReleaseSlot(lb) // the batch slot: now the batch waiter goes
	g2 := <-done
	if g2.err != nil || g2.who != "batch" {
		t.Fatalf("after the batch slot came free: %s got %v", g2.who, g2.err)
	}
	b.ReleaseSlot(g.lease)
	c.ReleaseSlot(g2.lease)
	// Everything is free again.
	for range 2 {
		l, _, err := a.AcquireSlot(ctx(t), interactive, 0)
		if err != nil {
			t.Fatalf("after releases: %v", err)
		}
		defer a.ReleaseSlot(l)
	}
}

func TestSlotsFIFO(t *testing.T) {
	srv := startRedis(t)
	spec := llmclient.LimitSpec{MaxConcurrent: 1, BatchShare: 1}
	holder := srv.store().Open("fifo", spec)
	l, _, err := holder.AcquireSlot(ctx(t), interactive, 0)
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	order := make(chan int, n)
	for i := range n {
		s := srv.store().Open("fifo", spec)
		go func() {
			l, _, err := s.AcquireSlot(context.Background(), interactive, 10*time.Second)
			if err != nil {
				order <- -1
				return
			}
			order <- i
			time.Sleep(20 * time.Millisecond)
			s.ReleaseSlot(l)
		}()
		waitQueued(t, srv, "fifo", int64(i+1))
	}
	holder.ReleaseSlot(l)
	for want := range n {
		if got := <-order; got != want {
			t.Fatalf("waiter %d served in place %d", got, want)
		}
	}
}

func TestLeaseRenewedWhileHeld(t *testing.T) {
	srv := startRedis(t)
	spec := llmclient.LimitSpec{MaxConcurrent: 1, BatchShare: 1}
	ttl := 300 * time.Millisecond
	a := srv.store(redisstore.WithLeaseTTL(ttl)).Open("renew", spec)
	b := srv.store(redisstore.WithLeaseTTL(ttl)).Open("renew", spec)
	l, _, err := a.AcquireSlot(ctx(t), interactive, 0)
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(4 * ttl); time.Now().Before(end); time.Sleep(ttl / 4) {
		if lb, _, err := b.AcquireSlot(ctx(t), interactive, 0); err == nil {
			b.ReleaseSlot(lb)
			t.Fatal("a held lease expired")
		}
	}
	a.ReleaseSlot(l)
	lb, _, err := b.AcquireSlot(ctx(t), interactive, 0)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	b.ReleaseSlot(lb)
}

// TestLeaseOfKilledProcess kills a process that holds a slot: the slot comes back within
// the lease TTL.
func TestLeaseOfKilledProcess(t *testing.T) {
	srv := startRedis(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), holderEnv+"="+srv.addr())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "held" {
		t.Fatalf("holder said %q, %v", line, err)
	}
	st := srv.store(redisstore.WithLeaseTTL(killTTL)).Open("killed", killSpec)
	if _, _, err := st.AcquireSlot(ctx(t), interactive, 0); err == nil {
		t.Fatal("took a slot the holder holds")
	}
	// Outlive one renewal, then kill it mid-request.
	time.Sleep(killTTL / 2)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	cmd.Wait()
	l, _, err := st.AcquireSlot(ctx(t), interactive, 3*killTTL)
	freed := time.Since(killed)
	if err != nil {
		t.Fatalf("the killed holder's slot did not come back: %v", err)
	}
	st.ReleaseSlot(l)
	if freed > killTTL+100*time.Millisecond {
		t.Fatalf("the slot came back %v after the kill, want within the lease TTL %v", freed, killTTL)
	}
	t.Logf("slot back %v after the kill (lease TTL %v)", freed, killTTL)
}

// waitQueued waits until n slot waiters are queued on the scope.
func waitQueued(t *testing.T, srv *redisServer, scope string, n int64) {
	t.Helper()
	rdb := srv.client()
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		got, err := rdb.ZCard(ctx(t), "{llmclient:"+scope+"}:w").Result()
		if err != nil {
			t.Fatal(err)
		}
		if got == n {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%d waiters queued on %s, want %d", got, scope, n)
		}
	}
}
