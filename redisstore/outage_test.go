package redisstore_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/redisstore"
	"github.com/redis/go-redis/v9"
)

// callLog is a go-redis hook that notes when each command the store sends starts, and
// whether its context (and that of every pipeline, such as a new connection's handshake)
// bounds it within the store's timeout.
type callLog struct {
	start   time.Time
	timeout time.Duration
	mu      sync.Mutex
	starts  []time.Duration
	unbound []string // commands whose context had no deadline, or a later one
}

func (c *callLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *callLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		now := time.Now()
		dl, ok := ctx.Deadline()
		c.mu.Lock()
		c.starts = append(c.starts, now.Sub(c.start))
		if !ok || dl.Sub(now) > c.timeout {
			c.unbound = append(c.unbound, cmd.Name())
		}
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (c *callLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		now := time.Now()
		if dl, ok := ctx.Deadline(); !ok || dl.Sub(now) > c.timeout {
			c.mu.Lock()
			for _, cmd := range cmds {
				c.unbound = append(c.unbound, "pipeline "+cmd.Name())
			}
			c.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

// between returns how many commands started in [from, to].
func (c *callLog) between(from, to time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.starts {
		if s >= from && s <= to {
			n++
		}
	}
	return n
}

type outcome struct {
	at, took time.Duration // since the run started; the admission's time
	err      error
}

// admit runs one admission the way the Client's limiter does: a slot, the buckets, a
// short call, the slot back.
func admit(ctx context.Context, st limitstore.State, call time.Duration) (time.Duration, error) {
	start := time.Now()
	lease, _, err := st.AcquireSlot(ctx, interactive, time.Minute)
	if err != nil {
		return time.Since(start), err
	}
	defer st.ReleaseSlot(lease)
	_, ok, err := reserveWait(st, ctx, limitstore.Reservation{Requests: 1, Tokens: 10, MaxWait: time.Minute})
	took := time.Since(start)
	if err != nil {
		return took, err
	}
	if !ok {
		return took, errors.New("not admitted")
	}
	time.Sleep(call)
	return took, nil
}

// TestOutage stops Redis while four workers admit (killed, then frozen so that calls
// hang), and brings it back. Each phase lasts until enough has happened in it, not for a
// set time, and the checks count what reached Redis rather than time it, so a loaded
// machine changes the numbers but not the outcome:
//
//   - every command the store sends has a deadline within the store's timeout;
//   - while Redis is away, the store sends at most the commands in flight when it went
//     (one per worker, one per worker's slot release on its way, and one for the renewal
//     goroutine) plus one probe per probe interval: a dead Redis costs a timeout to a
//     probe, not to every request;
//   - FailOpen admits every request, before, during and after the outage;
//   - FailClosed refuses every request during the outage with ErrUnavailable (and any
//     refusal outside it, which a call slower than the timeout may cause, says the same);
//   - the store goes back to Redis on its own, and its state is there again.
func TestOutage(t *testing.T) {
	const (
		timeout = 300 * time.Millisecond
		probe   = 200 * time.Millisecond
		workers = 4
		enough  = 20 // admissions per phase
	)
	spec := limitstore.Spec{
		Requests:      limitstore.Rate{PerSecond: 1e6, Burst: 1e6},
		Tokens:        limitstore.Rate{PerSecond: 1e9, Burst: 1e9},
		MaxConcurrent: workers, BatchShare: 1,
	}
	for _, mode := range []redisstore.FailMode{redisstore.FailOpen, redisstore.FailClosed} {
		for _, kind := range []string{"killed", "frozen"} {
			t.Run(mode.String()+"/"+kind, func(t *testing.T) {
				srv := startRedis(t)
				start := time.Now()
				calls := &callLog{start: start, timeout: timeout}
				rdb := redis.NewClient(&redis.Options{Addr: srv.addr(), ContextTimeoutEnabled: true})
				rdb.AddHook(calls)
				t.Cleanup(func() { rdb.Close() })
				s, err := redisstore.New(rdb, redisstore.WithFailMode(mode), redisstore.WithTimeout(timeout),
					redisstore.WithProbeInterval(probe))
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				st := s.Open("outage", spec)
				var (
					mu   sync.Mutex
					outs []outcome
					wg   sync.WaitGroup
				)
				stop := make(chan struct{})
				for range workers {
					wg.Go(func() {
						for {
							select {
							case <-stop:
								return
							default:
							}
							at := time.Since(start)
							took, err := admit(context.Background(), st, time.Millisecond)
							mu.Lock()
							outs = append(outs, outcome{at, took, err})
							mu.Unlock()
							if err != nil {
								time.Sleep(time.Millisecond)
							}
						}
					})
				}
				// count returns the admissions that started after from and ended, and how many
				// of them succeeded.
				count := func(from time.Duration) (ended, ok int) {
					mu.Lock()
					defer mu.Unlock()
					for _, o := range outs {
						if o.at > from {
							ended++
							if o.err == nil {
								ok++
							}
						}
					}
					return ended, ok
				}
				waitFor := func(what string, cond func() bool) {
					t.Helper()
					for end := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
						if time.Now().After(end) {
							close(stop)
							wg.Wait()
							t.Fatalf("waited a minute for %s", what)
						}
					}
				}

				waitFor("admissions before the outage", func() bool { _, ok := count(0); return ok >= enough })
				if kind == "killed" {
					srv.stop() // returns once the process has exited
				} else {
					srv.freeze() // returns once the process is stopped
				}
				// An admission that started before the server was down may have been
				// answered: the outage counts from here.
				wentDown := time.Since(start)
				waitFor("admissions during the outage", func() bool {
					ended, _ := count(wentDown)
					return ended >= enough && time.Since(start)-wentDown >= 3*probe
				})
				cameBack := time.Since(start)
				if kind == "killed" {
					srv.start()
				} else {
					srv.thaw()
				}
				waitFor("the store to use Redis again", s.Healthy)
				healthy := time.Since(start)
				waitFor("admissions after the outage", func() bool { _, ok := count(healthy); return ok >= enough })
				close(stop)
				wg.Wait()

				calls.mu.Lock()
				unbound := calls.unbound
				calls.mu.Unlock()
				if len(unbound) > 0 {
					t.Errorf("commands sent without a deadline within the timeout: %q", unbound)
				}
				down := cameBack - wentDown
				sent := calls.between(wentDown, cameBack)
				if limit := 2*workers + 1 + int(down/probe) + 1; sent > limit {
					t.Errorf("%d commands sent to Redis during a %v outage, want at most %d (those in flight and one probe per %v)",
						sent, down, limit, probe)
				}
				var before, during, after, failed int
				var refusals []time.Duration
				for _, o := range outs {
					switch {
					case o.at+o.took < wentDown:
						before++
					case o.at > wentDown && o.at+o.took < cameBack:
						during++
						if o.err != nil {
							failed++
							refusals = append(refusals, o.took)
						}
					case o.at > healthy:
						after++
					}
					switch {
					case o.err == nil:
					case mode == redisstore.FailOpen:
						t.Fatalf("FailOpen: an admission at %v failed: %v", o.at, o.err)
					case !errors.Is(o.err, redisstore.ErrUnavailable):
						t.Fatalf("FailClosed: refusal %v does not wrap ErrUnavailable", o.err)
					}
				}
				if mode == redisstore.FailClosed && failed != during {
					t.Errorf("FailClosed: %d of %d admissions failed during the outage", failed, during)
				}
				slices.Sort(refusals)
				p50 := time.Duration(0)
				if len(refusals) > 0 {
					p50 = refusals[len(refusals)/2]
				}
				t.Logf("%d admissions before, %d during (%d refused, median refusal %v), %d after the outage of %v; %d commands sent during it",
					before, during, failed, p50, after, down.Round(time.Millisecond), sent)
				// The state is in Redis again.
				if n, err := srv.client().Exists(ctx(t), "{llmclient:outage}:g").Result(); err != nil || n != 1 {
					t.Errorf("bucket key after recovery: %d, %v", n, err)
				}
			})
		}
	}
}

// TestFailOpenKeepsLocalLimits: while Redis is away, the local fallback enforces the
// share of the limits given by WithLocalShare. (The bucket refills once an hour, so the
// time the test takes does not matter.)
func TestFailOpenKeepsLocalLimits(t *testing.T) {
	srv := startRedis(t)
	s := srv.store(redisstore.WithTimeout(50*time.Millisecond), redisstore.WithLocalShare(0.5))
	spec := limitstore.Spec{Requests: limitstore.Rate{PerSecond: 1.0 / 3600, Burst: 4}, MaxConcurrent: 4, BatchShare: 1}
	st := s.Open("local", spec)
	srv.stop()
	admitted := 0
	for range 4 {
		_, ok, err := reserveWait(st, ctx(t), limitstore.Reservation{Requests: 1, MaxWait: 0})
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			admitted++
		}
	}
	if admitted != 2 {
		t.Errorf("the local fallback admitted %d of 4, want half the burst: 2", admitted)
	}
	var leases []limitstore.SlotLease
	for range 3 {
		l, _, err := st.AcquireSlot(ctx(t), interactive, 0)
		if err == nil {
			leases = append(leases, l)
		}
	}
	if len(leases) != 2 {
		t.Errorf("the local fallback gave %d of 3 slots, want half of 4: 2", len(leases))
	}
	for _, l := range leases {
		st.ReleaseSlot(l)
	}
	if l, _, err := st.AcquireSlot(ctx(t), interactive, 0); err != nil {
		t.Errorf("local slots not released: %v", err)
	} else {
		st.ReleaseSlot(l)
	}
}
