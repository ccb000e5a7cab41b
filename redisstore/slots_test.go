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

	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/redisstore"
	"github.com/redis/go-redis/v9"
)

const (
	interactive = false
	batch       = true
)

func TestSlotsAcrossStores(t *testing.T) {
	srv := startRedis(t)
	spec := limitstore.Spec{MaxConcurrent: 2, BatchShare: 0.5} // one batch slot
	a, b, c := srv.store().Open("k", spec), srv.store().Open("k", spec), srv.store().Open("k", spec)

	la, _, err := a.AcquireSlot(ctx(t), interactive, 0)
	if err != nil {
		t.Fatal(err)
	}
	lb, _, err := b.AcquireSlot(ctx(t), batch, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.AcquireSlot(ctx(t), interactive, 0); !errors.Is(err, limitstore.ErrRefused) {
		t.Fatalf("a third slot: %v, want ErrRefused", err)
	}
	// A waiter whose wait runs out leaves the queue.
	if _, w, err := c.AcquireSlot(ctx(t), interactive, 100*time.Millisecond); !errors.Is(err, limitstore.ErrRefused) ||
		w < 100*time.Millisecond {
		t.Fatalf("waiting 100ms: %v after %v, want ErrRefused after 100ms", err, w)
	}
	waitQueued(t, srv, "k", 0)
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
		lease limitstore.SlotLease
		err   error
	}
	done := make(chan got, 2)
	wait := func(who string, s limitstore.State, p bool) {
		l, _, err := s.AcquireSlot(context.Background(), p, time.Minute)
		done <- got{who, l, err}
	}
	go wait("batch", c, batch)
	waitQueued(t, srv, "k", 1)
	go wait("interactive", b, interactive)
	waitQueued(t, srv, "k", 2)

	start := time.Now()
	a.ReleaseSlot(la) // a main slot: the batch waiter may not take it (batch holds its one slot)
	g := <-done
	if g.err != nil || g.who != "interactive" {
		t.Fatalf("after a main slot came free: %s got %v, want the interactive waiter", g.who, g.err)
	}
	t.Logf("the waiter in another store noticed the free slot after %v", time.Since(start))
	b.ReleaseSlot(lb) // the batch slot: now the batch waiter goes
	g2 := <-done
	if g2.err != nil || g2.who != "batch" {
		t.Fatalf("after the batch slot came free: %s got %v", g2.who, g2.err)
	}
	b.ReleaseSlot(g.lease)
	c.ReleaseSlot(g2.lease)
	// Everything is free again, once the releases reach Redis.
	waitMembers(t, srv.client(), "{llmclient:k}:s", 0)
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
	spec := limitstore.Spec{MaxConcurrent: 1, BatchShare: 1}
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
			l, _, err := s.AcquireSlot(context.Background(), interactive, time.Minute)
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

// leases returns the scope's leases in Redis (member → expiry) and the server's clock, in
// µs since the epoch.
func leases(t *testing.T, rdb *redis.Client, scope string) (map[string]float64, float64) {
	t.Helper()
	zs, err := rdb.ZRangeWithScores(ctx(t), "{llmclient:"+scope+"}:s", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	now, err := rdb.Time(ctx(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]float64, len(zs))
	for _, z := range zs {
		m[z.Member.(string)] = z.Score
	}
	return m, float64(now.UnixMicro())
}

// TestLeaseRenewedWhileHeld: while a process holds a slot, its lease's expiry moves
// forward, never further than one lease TTL ahead of the server's clock, and no other
// process can take the slot; once released, it can. The check waits for renewals to be
// seen in Redis rather than for a set time.
func TestLeaseRenewedWhileHeld(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.client()
	spec := limitstore.Spec{MaxConcurrent: 1, BatchShare: 1}
	const ttl = 3 * time.Second // renewed every second: only a stall of two seconds loses it
	opts := []redisstore.Option{redisstore.WithLeaseTTL(ttl), redisstore.WithTimeout(time.Second)}
	a := srv.store(opts...).Open("renew", spec)
	b := srv.store(opts...).Open("renew", spec)
	l, _, err := a.AcquireSlot(ctx(t), interactive, 0)
	if err != nil {
		t.Fatal(err)
	}
	held, _ := leases(t, rdb, "renew")
	if len(held) != 1 {
		t.Fatalf("leases %v, want one", held)
	}
	var member string
	var last float64
	for m, exp := range held {
		member, last = m, exp
	}
	for renewals, end := 0, time.Now().Add(time.Minute); renewals < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the lease was renewed %d times in a minute", renewals)
		}
		if lb, _, err := b.AcquireSlot(ctx(t), interactive, 0); err == nil {
			b.ReleaseSlot(lb)
			t.Fatal("another store took the held slot")
		}
		now, nowUs := leases(t, rdb, "renew")
		exp, ok := now[member]
		switch {
		case !ok:
			t.Fatal("the held lease is gone from Redis")
		case exp > nowUs+float64(ttl.Microseconds()):
			t.Fatalf("the lease expires %vµs ahead, more than the lease TTL", exp-nowUs)
		case exp > last:
			renewals++
			last = exp
		}
	}
	a.ReleaseSlot(l)
	waitMembers(t, rdb, "{llmclient:renew}:s", 0)
	lb, _, err := b.AcquireSlot(ctx(t), interactive, 0)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	b.ReleaseSlot(lb)
}

// TestLeaseOfKilledProcess kills a process that holds a slot, once Redis shows it renewed
// the lease: the lease then expires within the lease TTL of the kill (its expiry in Redis
// says so, on the server's clock), and a waiter in another process gets the slot.
func TestLeaseOfKilledProcess(t *testing.T) {
	srv := startRedis(t)
	rdb := srv.client()
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
	st := srv.store(redisstore.WithLeaseTTL(killTTL), redisstore.WithTimeout(time.Second)).Open("killed", killSpec)
	if _, _, err := st.AcquireSlot(ctx(t), interactive, 0); err == nil {
		t.Fatal("took a slot the holder holds")
	}
	// Kill it once it has renewed its lease.
	first, _ := leases(t, rdb, "killed")
	if len(first) != 1 {
		t.Fatalf("leases %v, want the holder's", first)
	}
	for end := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		now, _ := leases(t, rdb, "killed")
		renewed := false
		for m, exp := range now {
			renewed = exp > first[m]
		}
		if renewed {
			break
		}
		if len(now) == 0 || time.Now().After(end) {
			t.Fatalf("the holder's lease was not renewed: %v", now)
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	left, killedAt := leases(t, rdb, "killed")
	for m, exp := range left {
		if exp > killedAt+float64(killTTL.Microseconds()) {
			t.Fatalf("the killed holder's lease %s expires %vµs after the kill, beyond the lease TTL %v", m, exp-killedAt, killTTL)
		}
	}
	l, _, err := st.AcquireSlot(ctx(t), interactive, -1)
	if err != nil {
		t.Fatalf("the killed holder's slot did not come back: %v", err)
	}
	st.ReleaseSlot(l)
}

// waitQueued waits until n slot waiters are queued on the scope.
func waitQueued(t *testing.T, srv *redisServer, scope string, n int64) {
	t.Helper()
	rdb := srv.client()
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
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
