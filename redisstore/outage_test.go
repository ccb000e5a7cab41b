package redisstore_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/redisstore"
)

type outcome struct {
	at, took time.Duration // since the run started; the admission's time
	err      error
}

// admit runs one admission the way the Client's limiter does: a slot, the buckets, a
// short call, the slot back.
func admit(ctx context.Context, st llmclient.LimitState, call time.Duration) (time.Duration, error) {
	start := time.Now()
	lease, _, err := st.AcquireSlot(ctx, interactive, time.Second)
	if err != nil {
		return time.Since(start), err
	}
	defer st.ReleaseSlot(lease)
	_, ok, err := st.Reserve(ctx, llmclient.Reservation{Requests: 1, Tokens: 10, MaxWait: time.Second})
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

// TestOutage stops Redis mid-run (killed, then frozen so that calls hang) and brings it
// back: under FailOpen requests keep flowing on local limits, under FailClosed they fail
// fast; no admission waits longer than the timeout, and the store goes back to Redis
// without help.
func TestOutage(t *testing.T) {
	const (
		timeout = 150 * time.Millisecond // above the scheduling delays of a busy machine under -race
		probe   = 300 * time.Millisecond
		down    = 500 * time.Millisecond // Redis goes away
		up      = 2000 * time.Millisecond
		end     = 3000 * time.Millisecond
		slack   = 100 * time.Millisecond
	)
	spec := llmclient.LimitSpec{
		Requests:      llmclient.Rate{PerSecond: 1000, Burst: 1000},
		Tokens:        llmclient.Rate{PerSecond: 1e6, Burst: 1e6},
		MaxConcurrent: 4, BatchShare: 1,
	}
	for _, mode := range []redisstore.FailMode{redisstore.FailOpen, redisstore.FailClosed} {
		for _, kind := range []string{"killed", "frozen"} {
			t.Run(mode.String()+"/"+kind, func(t *testing.T) {
				srv := startRedis(t)
				s := srv.store(redisstore.WithFailMode(mode), redisstore.WithTimeout(timeout),
					redisstore.WithProbeInterval(probe))
				st := s.Open("outage", spec)
				start := time.Now()
				var (
					mu   sync.Mutex
					outs []outcome
					wg   sync.WaitGroup
				)
				for range 4 {
					wg.Go(func() {
						for time.Since(start) < end {
							at := time.Since(start)
							took, err := admit(context.Background(), st, 2*time.Millisecond)
							mu.Lock()
							outs = append(outs, outcome{at, took, err})
							mu.Unlock()
							if err != nil {
								time.Sleep(2 * time.Millisecond)
							}
						}
					})
				}
				time.Sleep(down)
				if kind == "killed" {
					srv.stop()
				} else {
					srv.freeze()
				}
				wentDown := time.Since(start)
				time.Sleep(up - wentDown)
				cameBack := time.Since(start)
				if kind == "killed" {
					srv.start()
				} else {
					srv.thaw()
				}
				wg.Wait()

				var before, during, after, failed, slowest, timeouts int
				var longest time.Duration
				var fastFails []time.Duration
				for _, o := range outs {
					if o.took > longest {
						longest = o.took
					}
					if o.took > timeout+slack {
						slowest++
					}
					switch {
					case o.at+o.took < wentDown-time.Millisecond:
						before++
						if o.err != nil {
							t.Fatalf("before the outage: %v", o.err)
						}
					case o.at > wentDown && o.at+o.took < cameBack:
						during++
						if o.took >= timeout/2 {
							timeouts++
						}
						if o.err != nil {
							failed++
							fastFails = append(fastFails, o.took)
						}
					case o.at > cameBack+probe+slack:
						after++
						if o.err != nil {
							t.Fatalf("%v after Redis came back: %v", o.at-cameBack, o.err)
						}
					}
				}
				t.Logf("%d admissions before, %d during (%d failed, %d timed out), %d after the outage; longest %v",
					before, during, failed, timeouts, after, longest)
				if slowest > 0 {
					t.Errorf("%d admissions took longer than the timeout %v (+%v); longest %v", slowest, timeout, slack, longest)
				}
				// A dead Redis costs a timeout to the admissions in flight when it goes, then to
				// one probe per interval, not to every request.
				if limit := 4 + int((cameBack-wentDown)/probe) + 2; timeouts > limit {
					t.Errorf("%d admissions waited for the timeout during the outage, want at most %d", timeouts, limit)
				}
				if before == 0 || during == 0 || after == 0 {
					t.Fatal("requests did not flow in every phase")
				}
				switch mode {
				case redisstore.FailOpen:
					if failed > 0 {
						t.Errorf("FailOpen: %d admissions failed during the outage", failed)
					}
				case redisstore.FailClosed:
					if failed != during {
						t.Errorf("FailClosed: %d of %d admissions failed during the outage", failed, during)
					}
					slices.Sort(fastFails)
					if p50 := fastFails[len(fastFails)/2]; p50 > 5*time.Millisecond {
						t.Errorf("FailClosed: the median refusal took %v, want it at once", p50)
					}
					for _, o := range outs {
						if o.err != nil && !errors.Is(o.err, redisstore.ErrUnavailable) {
							t.Fatalf("refusal %v does not wrap ErrUnavailable", o.err)
						}
					}
				}
				if !s.Healthy() {
					t.Error("not healthy after Redis came back")
				}
				// The state is in Redis again.
				if n, err := srv.client().Exists(ctx(t), "{llmclient:outage}:g").Result(); err != nil || n != 1 {
					t.Errorf("bucket key after recovery: %d, %v", n, err)
				}
			})
		}
	}
}

// TestFailOpenKeepsLocalLimits: while Redis is away, the local fallback enforces the
// share of the limits given by WithLocalShare.
func TestFailOpenKeepsLocalLimits(t *testing.T) {
	srv := startRedis(t)
	s := srv.store(redisstore.WithTimeout(50*time.Millisecond), redisstore.WithLocalShare(0.5))
	spec := llmclient.LimitSpec{Requests: llmclient.Rate{PerSecond: 1, Burst: 4}, MaxConcurrent: 4, BatchShare: 1}
	st := s.Open("local", spec)
	srv.stop()
	admitted := 0
	for range 4 {
		_, ok, err := st.Reserve(ctx(t), llmclient.Reservation{Requests: 1, MaxWait: 0})
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
	var leases []llmclient.SlotLease
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
