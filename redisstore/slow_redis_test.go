package redisstore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/redisstore"
	"github.com/redis/go-redis/v9"
)

// slowHook makes the store's commands (scripts) it matches wait delay before they reach
// Redis: a Redis that answers, slowly but within the store's timeout (a busy server, a
// far region). A command whose context ends meanwhile fails, as a real server's reply
// would be cut. The handshake of a new connection is not delayed, so that a test counts
// round trips of the store only.
type slowHook struct {
	delay atomic.Int64 // nanoseconds; 0: no delay
	// only, when set, delays only the slot script's calls with that op ("release").
	only string
	n    atomic.Int64 // commands delayed
}

func (h *slowHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *slowHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if d := time.Duration(h.delay.Load()); d > 0 && h.matches(cmd) {
			h.n.Add(1)
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return next(ctx, cmd)
	}
}

func (h *slowHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *slowHook) matches(cmd redis.Cmder) bool {
	if n := cmd.Name(); n != "evalsha" && n != "eval" {
		return false
	}
	if h.only == "" {
		return true
	}
	for _, a := range cmd.Args() {
		if s, ok := a.(string); ok && s == h.only {
			return true
		}
	}
	return false
}

// slowStore returns a store with the given timeout whose Redis client goes through h.
func slowStore(t *testing.T, srv *redisServer, h *slowHook, timeout time.Duration) (*redisstore.Store, *redis.Client) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	rdb.AddHook(h)
	t.Cleanup(func() { rdb.Close() })
	st, err := redisstore.New(rdb, redisstore.WithTimeout(timeout), redisstore.WithLeaseTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, rdb
}

// slowClient returns a Client on st whose upstream has a concurrency bound and shares its
// breaker: one call makes every kind of round trip (breaker, block, slot, buckets, slot
// release). It has made one call already, which loaded the scripts, and whose slot is
// back in Redis.
func slowClient(t *testing.T, st *redisstore.Store, rdb *redis.Client) *llmclient.Client {
	t.Helper()
	c, err := llmclient.New(
		llmclient.WithUpstream(llmclient.Upstream{Name: "vendor", Provider: fake.New(fake.Reply("ok").Forever()),
			Limits: llmclient.Limits{RPM: 6000, TPM: 1_000_000, MaxConcurrent: 4}}),
		llmclient.WithLimitStore(st), llmclient.WithSharedBreakers())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Complete(ctx(t), hello()); err != nil {
		t.Fatal(err)
	}
	if !st.Healthy() {
		t.Fatal("the store is not healthy after the first call")
	}
	waitSlotsFree(t, rdb)
	return c
}

// waitSlotsFree waits until the Client's upstream holds no slot in Redis.
func waitSlotsFree(t *testing.T, rdb *redis.Client) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n, err := rdb.ZCard(ctx(t), "{llmclient:vendor/default}:s").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%d slot leases in Redis long after the calls", n)
		}
	}
}

// TestSlowRedisFallsBack: a Redis that answers every command within the store's timeout,
// but in three quarters of it, must not cost a call a timeout per round trip while the
// store calls itself healthy. A reply slower than a quarter of the timeout counts as a
// failure: the call waits for that one reply, the store falls back for its later steps
// and for the next calls until the probe interval has passed.
func TestSlowRedisFallsBack(t *testing.T) {
	srv := startRedis(t)
	h := &slowHook{}
	const timeout = 2 * time.Second
	st, rdb := slowStore(t, srv, h, timeout)
	c := slowClient(t, st, rdb)

	h.delay.Store(int64(3 * timeout / 4))
	start := time.Now()
	_, err := c.Complete(context.Background(), hello())
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("one call on a Redis that answers in %v: %v, %d round trips slowed", 3*timeout/4, took.Round(time.Millisecond), h.n.Load())
	// One slow reply, at most a timeout; the other steps no longer wait on Redis. (It
	// used to wait for five of them, almost four timeouts.)
	if took >= 2*timeout {
		t.Errorf("one call waited %v on Redis; WithTimeout is %v", took.Round(time.Millisecond), timeout)
	}
	if st.Healthy() {
		t.Error("the store calls a Redis that answers in three quarters of its timeout healthy")
	}

	// The next call, within the probe interval, does not wait on Redis at all.
	n := h.n.Load()
	start = time.Now()
	if _, err := c.Complete(context.Background(), hello()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= timeout/2 || h.n.Load() != n {
		t.Errorf("the next call took %v and made %d round trips to the slow Redis, want none",
			took.Round(time.Millisecond), h.n.Load()-n)
	}
}

// TestSlowRedisCallKeepsItsDeadline: every command answers in half the store's timeout;
// a call with a deadline of 7/8 of the timeout used to spend it on four round trips
// before the upstream (the last one cut by the deadline), then wait for the slot release
// past it. It now waits for the first slow reply only, and returns the upstream's answer
// within its deadline.
func TestSlowRedisCallKeepsItsDeadline(t *testing.T) {
	srv := startRedis(t)
	h := &slowHook{}
	const timeout = 2 * time.Second
	st, rdb := slowStore(t, srv, h, timeout)
	c := slowClient(t, st, rdb)

	h.delay.Store(int64(timeout / 2))
	const deadline = 7 * timeout / 8
	call, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	_, err := c.Complete(call, hello())
	took := time.Since(start)
	t.Logf("%d round trips slowed, %v: %v", h.n.Load(), took.Round(time.Millisecond), err)
	if err != nil {
		t.Errorf("a call with a deadline of %v on a Redis that answers in %v: %v", deadline, timeout/2, err)
	}
	if took > deadline {
		t.Errorf("the call's deadline was %v; it returned after %v", deadline, took.Round(time.Millisecond))
	}
}

// TestSlowReplyCountsAsFailure: a reply slower than a quarter of the store's timeout is
// used (the script ran: a reservation it admitted is charged in Redis), and marks Redis
// down as a failure would: the next operations use the fallback without calling it. A
// caller that gave up after that long marks it down too.
func TestSlowReplyCountsAsFailure(t *testing.T) {
	srv := startRedis(t)
	const timeout = 2 * time.Second
	spec := limitstore.Spec{Requests: limitstore.Rate{PerSecond: 10, Burst: 10}, BatchShare: 1}
	res := limitstore.Reservation{Requests: 1, MaxWait: -1}

	t.Run("answered", func(t *testing.T) {
		h := &slowHook{}
		st, _ := slowStore(t, srv, h, timeout)
		s := st.Open("answered", spec)
		if _, err := s.Reserve(ctx(t), res); err != nil || !st.Healthy() {
			t.Fatalf("a fast reply: %v, healthy %v", err, st.Healthy())
		}
		h.delay.Store(int64(timeout / 2))
		g, err := s.Reserve(ctx(t), res)
		if err != nil || !g.OK || g.Mark < 1<<50 {
			t.Fatalf("a slow reply: %+v, %v; want Redis's grant (a mark from its clock)", g, err)
		}
		if st.Healthy() {
			t.Fatalf("the store is healthy after a reply in half its timeout")
		}
		n := h.n.Load()
		g, err = s.Reserve(ctx(t), res)
		if err != nil || !g.OK || g.Mark >= 1<<50 || h.n.Load() != n {
			t.Fatalf("after a slow reply: %+v, %v, %d round trips; want the fallback's grant without Redis",
				g, err, h.n.Load()-n)
		}
	})
	t.Run("gave up", func(t *testing.T) {
		h := &slowHook{}
		st, _ := slowStore(t, srv, h, timeout)
		s := st.Open("gaveup", spec)
		if _, err := s.Reserve(ctx(t), res); err != nil || !st.Healthy() {
			t.Fatalf("a fast reply: %v, healthy %v", err, st.Healthy())
		}
		h.delay.Store(int64(3 * timeout / 4))
		cc, cancel := context.WithTimeout(context.Background(), timeout/2)
		defer cancel()
		if _, err := s.Reserve(cc, res); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a caller that gave up: %v", err)
		}
		if st.Healthy() {
			t.Fatalf("the store is healthy after a caller waited half its timeout for no reply")
		}
	})
}

// TestSlowReplyUnderFailClosedIsWaitedFor: under FailClosed the fallback refuses, so a
// reply slower than a quarter of the timeout (but within it) is an answer, not a failure:
// the store stays on Redis, and the next operation calls it again.
func TestSlowReplyUnderFailClosedIsWaitedFor(t *testing.T) {
	srv := startRedis(t)
	const timeout = 2 * time.Second
	h := &slowHook{}
	rdb := redis.NewClient(&redis.Options{Addr: srv.addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	rdb.AddHook(h)
	t.Cleanup(func() { rdb.Close() })
	st, err := redisstore.New(rdb, redisstore.WithTimeout(timeout), redisstore.WithFailMode(redisstore.FailClosed))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	spec := limitstore.Spec{Requests: limitstore.Rate{PerSecond: 10, Burst: 10}, BatchShare: 1}
	res := limitstore.Reservation{Requests: 1, MaxWait: -1}
	s := st.Open("closed", spec)
	if _, err := s.Reserve(ctx(t), res); err != nil || !st.Healthy() { // loads the script
		t.Fatalf("a fast reply: %v, healthy %v", err, st.Healthy())
	}
	h.delay.Store(int64(timeout / 2))
	for i := range 2 {
		n := h.n.Load()
		g, err := s.Reserve(ctx(t), res)
		if err != nil || !g.OK || g.Mark < 1<<50 || h.n.Load() == n {
			t.Fatalf("reservation %d: %+v, %v; want Redis's grant (a mark from its clock)", i+1, g, err)
		}
		if !st.Healthy() {
			t.Fatalf("reservation %d: the store left Redis after a slow answer under FailClosed", i+1)
		}
	}
}
