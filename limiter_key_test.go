package llmclient

import (
	"context"
	"errors"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/ratelimit"
)

// newTestLimiter returns a key limiter with the default configuration changed by opts.
func newTestLimiter(t *testing.T, l Limits, opts ...func(*limiterConfig)) *keyLimiter {
	t.Helper()
	cfg := defaultLimiterConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	if err := l.validate(); err != nil {
		t.Fatal(err)
	}
	return newKeyLimiter(l, &cfg)
}

// mustAcquire admits a request or fails the test; it returns the lease and the virtual
// time elapsed since start.
func mustAcquire(t *testing.T, l *keyLimiter, ctx context.Context, cost int, prio ratelimit.Priority, start time.Time) (limitLease, time.Duration) {
	t.Helper()
	ls, _, err := l.acquire(ctx, cost, prio)
	if err != nil {
		t.Fatalf("acquire(%d): %v", cost, err)
	}
	return ls, time.Since(start)
}

func TestLimiterRPMBurstThenOnePerSecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, Limits{RPM: 60}) // burst 60/6 = 10
		start := time.Now()
		for i := range 30 {
			ls, at := mustAcquire(t, l, t.Context(), 1, ratelimit.Interactive, start)
			ls.release(0, true)
			want := time.Duration(0)
			if i >= 10 {
				want = time.Duration(i-9) * time.Second
			}
			if at != want {
				t.Fatalf("request %d admitted at %v, want %v", i, at, want)
			}
		}
	})
}

func TestLimiterRPMConcurrentCallersAdmittedInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, Limits{RPM: 60})
		start := time.Now()
		var mu sync.Mutex
		var times []time.Duration
		var wg sync.WaitGroup
		for range 40 {
			wg.Go(func() {
				ls, at := mustAcquire(t, l, t.Context(), 1, ratelimit.Interactive, start)
				ls.release(0, true)
				mu.Lock()
				times = append(times, at)
				mu.Unlock()
			})
		}
		wg.Wait()
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		for i, at := range times {
			want := time.Duration(max(0, i-9)) * time.Second
			if at != want {
				t.Fatalf("admission %d at %v, want %v (all: %v)", i, at, want, times)
			}
		}
	})
}

// TestLimiterTPMWindow offers mixed sizes from several goroutines for ten virtual minutes
// and checks every 60 s window: a token bucket admits at most its burst plus a minute's
// refill in any minute, and the long-run rate stays at the quota.
func TestLimiterTPMWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const tpm, burst = 60_000, 10_000
		l := newTestLimiter(t, Limits{TPM: tpm})
		type adm struct {
			at   time.Duration
			cost int
		}
		var mu sync.Mutex
		var log []adm
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), 7))
				for {
					cost := 1 + rng.IntN(burst) // up to the whole bucket
					if rng.IntN(4) == 0 {
						cost = 1 + rng.IntN(300) // and many small ones
					}
					ls, _, err := l.acquire(ctx, cost, ratelimit.Interactive)
					if err != nil {
						return // the deadline: waits that do not fit end the loop
					}
					mu.Lock()
					log = append(log, adm{time.Since(start), cost})
					mu.Unlock()
					time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
					ls.release(0, true)
				}
			})
		}
		wg.Wait()
		sort.Slice(log, func(i, j int) bool { return log[i].at < log[j].at })
		var total int
		j, window := 0, 0
		for i := range log {
			total += log[i].cost
			window += log[i].cost
			for log[j].at <= log[i].at-time.Minute {
				window -= log[j].cost
				j++
			}
			if window > tpm+burst {
				t.Fatalf("%d tokens admitted in the minute before %v, bucket allows at most %d", window, log[i].at, tpm+burst)
			}
		}
		elapsed := log[len(log)-1].at
		if limit := burst + int(elapsed.Seconds()*tpm/60); total > limit {
			t.Fatalf("%d tokens admitted in %v, more than burst + rate = %d", total, elapsed, limit)
		}
		if total < 9*tpm {
			t.Fatalf("only %d tokens admitted in 10 minutes under saturation, want ≥ %d", total, 9*tpm)
		}
	})
}

func TestLimiterConcurrencyNeverExceedsMax(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, Limits{MaxConcurrent: 5})
		var inFlight, peak, done atomic.Int64
		var wg sync.WaitGroup
		for g := range 100 {
			wg.Go(func() {
				ls, _, err := l.acquire(t.Context(), 10, ratelimit.Interactive)
				if err != nil {
					t.Errorf("acquire: %v", err)
					return
				}
				n := inFlight.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				if got := l.InFlight(); got > 5 {
					t.Errorf("InFlight() = %d, want ≤ 5", got)
				}
				time.Sleep(time.Duration(10+g%7*10) * time.Millisecond)
				inFlight.Add(-1)
				ls.release(0, true)
				done.Add(1)
			})
		}
		wg.Wait()
		if p := peak.Load(); p != 5 {
			t.Fatalf("peak in flight %d, want exactly 5", p)
		}
		if done.Load() != 100 || l.InFlight() != 0 {
			t.Fatalf("done %d, InFlight %d; want 100, 0", done.Load(), l.InFlight())
		}
	})
}

// TestLimiterRequestLargerThanBucket: 60k TPM with a 10k bucket admits a 15k-token request
// once the bucket is full, and the 5k of debt delays the next request.
func TestLimiterRequestLargerThanBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, Limits{TPM: 60_000, TokenBurst: 10_000}) // 1000 tokens/s
		start := time.Now()
		ls, at := mustAcquire(t, l, t.Context(), 10_000, ratelimit.Interactive, start)
		ls.release(0, true)
		if at != 0 {
			t.Fatalf("first 10k admitted at %v, want 0", at)
		}
		ls, at = mustAcquire(t, l, t.Context(), 15_000, ratelimit.Interactive, start)
		ls.release(0, true)
		if at != 10*time.Second {
			t.Fatalf("15k request admitted at %v, want 10s (bucket full again)", at)
		}
		ls, at = mustAcquire(t, l, t.Context(), 1_000, ratelimit.Interactive, start)
		ls.release(0, true)
		if at != 16*time.Second {
			t.Fatalf("next 1k request admitted at %v, want 16s (5k debt + 1k)", at)
		}
	})
}

// TestLimiterRequestLargerThanBucketNotStarved: a huge request queued behind a stream of
// small ones is admitted in its turn, not overtaken forever.
func TestLimiterRequestLargerThanBucketNotStarved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, Limits{TPM: 6_000}) // 100/s, bucket 1000
		start := time.Now()
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for range 4 { // small requests arriving all the time
			wg.Go(func() {
				for ctx.Err() == nil {
					ls, _, err := l.acquire(ctx, 50, ratelimit.Interactive)
					if err != nil {
						return
					}
					ls.release(0, true)
				}
			})
		}
		time.Sleep(5 * time.Second)
		ls, at := mustAcquire(t, l, t.Context(), 5_000, ratelimit.Interactive, start)
		ls.release(0, true)
		cancel()
		wg.Wait()
		// Arrived at 5 s behind at most four queued small requests and the bucket's refill.
		if at > 5*time.Second+20*time.Second {
			t.Fatalf("large request admitted at %v: starved", at)
		}
	})
}

func TestLimiterWaitBeyondDeadlineFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, Limits{TPM: 6_000}) // 100/s, bucket 1000
		start := time.Now()
		ls, _ := mustAcquire(t, l, t.Context(), 1_000, ratelimit.Interactive, start)
		ls.release(0, true)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		_, waited, err := l.acquire(ctx, 500, ratelimit.Interactive) // needs 5 s
		if time.Since(start) != 0 || waited != 0 {
			t.Fatalf("slept %v (waited %v) before failing", time.Since(start), waited)
		}
		var e *Error
		if !errors.As(err, &e) || e.Class != failure.RateLimited || !errors.Is(err, ErrRateLimited) {
			t.Fatalf("err = %v, want a rate-limited *Error", err)
		}
		if e.RetryAfter != 0 || !strings.Contains(e.Message, "5s") {
			t.Fatalf("RetryAfter = %v, message %q: want no Retry-After (a local refusal) and the 5s wait named", e.RetryAfter, e.Message)
		}
		// Nothing was charged: a request with time to wait gets the original schedule.
		ls, at := mustAcquire(t, l, t.Context(), 500, ratelimit.Interactive, start)
		ls.release(0, true)
		if at != 5*time.Second {
			t.Fatalf("next request admitted at %v, want 5s", at)
		}
	})
}

func TestLimiterFailFastAndMaxWait(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opt      func(*limiterConfig)
		cost     int
		wantWait time.Duration // 0: must fail
	}{
		{"failfast", func(c *limiterConfig) { c.mode = ratelimit.FailFast }, 100, 0},
		{"maxwait too short", func(c *limiterConfig) { c.maxWait = 500 * time.Millisecond }, 100, 0},
		{"maxwait long enough", func(c *limiterConfig) { c.maxWait = 2 * time.Second }, 100, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newTestLimiter(t, Limits{TPM: 6_000}, tc.opt)
				start := time.Now()
				ls, _ := mustAcquire(t, l, t.Context(), 1_000, ratelimit.Interactive, start)
				ls.release(0, true)
				ls, waited, err := l.acquire(t.Context(), tc.cost, ratelimit.Interactive)
				if tc.wantWait == 0 {
					if !errors.Is(err, ErrRateLimited) || time.Since(start) != 0 {
						t.Fatalf("err %v after %v, want ErrRateLimited at once", err, time.Since(start))
					}
					return
				}
				if err != nil || waited != tc.wantWait {
					t.Fatalf("err %v, waited %v; want nil, %v", err, waited, tc.wantWait)
				}
				ls.release(0, true)
			})
		})
	}
}

func TestLimiterCancellationReturnsTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, Limits{TPM: 6_000, MaxConcurrent: 3})
		start := time.Now()
		ls, _ := mustAcquire(t, l, t.Context(), 1_000, ratelimit.Interactive, start)
		ls.release(0, true)

		// A waiter canceled during its wait gives its reservation back.
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, _, err := l.acquire(ctx, 800, ratelimit.Interactive) // would wait 8 s
			errc <- err
		}()
		time.Sleep(time.Second)
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled waiter: %v, want context.Canceled", err)
		}
		ls, at := mustAcquire(t, l, t.Context(), 500, ratelimit.Interactive, start)
		if at != 5*time.Second {
			t.Fatalf("after the cancel, 500 tokens admitted at %v, want 5s as if it never came", at)
		}
		// An attempt that failed before the upstream counted it gives everything back.
		ls.release(0, false)
		ls, at = mustAcquire(t, l, t.Context(), 500, ratelimit.Interactive, start)
		ls.release(0, true)
		if at != 5*time.Second {
			t.Fatalf("after an unused release, 500 tokens admitted at %v, want 5s", at)
		}
		if l.InFlight() != 0 {
			t.Fatalf("InFlight = %d after all releases", l.InFlight())
		}
	})
}

func TestLimiterReconciliation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		metering ratelimit.Metering
		actual   int
		next     int
		wantAt   time.Duration
	}{
		// 1000-token bucket at 100/s, drained by a 1000-token estimate.
		{"usage refunds an over-reservation", ratelimit.MeterUsage, 200, 800, 0},
		{"usage charges an overrun", ratelimit.MeterUsage, 1_500, 100, 6 * time.Second},
		{"unknown usage keeps the estimate", ratelimit.MeterUsage, 0, 100, time.Second},
		{"admission keeps the estimate", ratelimit.MeterAdmission, 200, 100, time.Second},
		{"admission charges an overrun", ratelimit.MeterAdmission, 1_500, 100, 6 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newTestLimiter(t, Limits{TPM: 6_000, Metering: tc.metering})
				start := time.Now()
				ls, _ := mustAcquire(t, l, t.Context(), 1_000, ratelimit.Interactive, start)
				ls.release(tc.actual, true)
				ls, at := mustAcquire(t, l, t.Context(), tc.next, ratelimit.Interactive, start)
				ls.release(0, true)
				if at != tc.wantAt {
					t.Fatalf("next %d tokens admitted at %v, want %v", tc.next, at, tc.wantAt)
				}
			})
		})
	}
}

// TestLimiterBatchLeavesInteractiveShare saturates a key with batch traffic and checks that
// interactive requests are still admitted at once, on the buckets and on the slots.
func TestLimiterBatchLeavesInteractiveShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, Limits{RPM: 600, TPM: 60_000, MaxConcurrent: 5})
		ctx, cancel := context.WithCancel(t.Context())
		var batchTokens, batchPeak, batchNow atomic.Int64
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				for ctx.Err() == nil {
					ls, _, err := l.acquire(ctx, 500, ratelimit.Batch)
					if err != nil {
						return
					}
					n := batchNow.Add(1)
					for p := batchPeak.Load(); n > p && !batchPeak.CompareAndSwap(p, n); p = batchPeak.Load() {
					}
					batchTokens.Add(500)
					time.Sleep(200 * time.Millisecond)
					batchNow.Add(-1)
					ls.release(0, true)
				}
			})
		}
		time.Sleep(30 * time.Second)
		for i := range 5 {
			start := time.Now()
			ls, at := mustAcquire(t, l, t.Context(), 1_000, ratelimit.Interactive, start)
			if at > 0 {
				t.Errorf("interactive request %d waited %v under batch saturation", i, at)
			}
			time.Sleep(100 * time.Millisecond)
			ls.release(0, true)
		}
		cancel()
		wg.Wait()
		if p := batchPeak.Load(); p != 4 {
			t.Errorf("batch peak in flight %d, want 4 (80%% of 5 slots)", p)
		}
		// Batch got no more than its share of the tokens: 80% of the refill plus its burst.
		if got, most := batchTokens.Load(), int64(0.8*(10_000+30.5*1_000)); got > most {
			t.Errorf("batch admitted %d tokens in 30 s, more than its share %d", got, most)
		}
	})
}

func TestLimiterPauseHoldsEveryCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, Limits{RPM: 60})
		start := time.Now()
		l.pause(start.Add(10 * time.Second))
		ls, at := mustAcquire(t, l, t.Context(), 1, ratelimit.Interactive, start)
		ls.release(0, true)
		if at != 10*time.Second {
			t.Fatalf("admitted at %v during a 10 s pause", at)
		}
		// A caller already sleeping in the limiter when the pause comes waits it out too.
		for range 10 {
			ls, _ := mustAcquire(t, l, t.Context(), 1, ratelimit.Interactive, start)
			ls.release(0, true)
		}
		done := make(chan time.Duration, 1)
		go func() { // the bucket is empty: it sleeps 1 s
			ls, at := mustAcquire(t, l, t.Context(), 1, ratelimit.Interactive, start)
			ls.release(0, true)
			done <- at
		}()
		time.Sleep(500 * time.Millisecond)
		end := time.Now().Add(5 * time.Second)
		l.pause(end)
		if at := <-done; at != end.Sub(start) {
			t.Fatalf("sleeping caller admitted at %v, want %v (end of the pause)", at, end.Sub(start))
		}
		// A pause longer than the deadline fails at once.
		l.pause(time.Now().Add(time.Minute))
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if _, _, err := l.acquire(ctx, 1, ratelimit.Interactive); !errors.Is(err, ErrRateLimited) {
			t.Fatalf("during a 1 min pause with a 5 s deadline: %v, want ErrRateLimited", err)
		}
	})
}

func TestLimiterNilIsUnlimited(t *testing.T) {
	var l *keyLimiter
	ls, waited, err := l.acquire(context.Background(), 1_000_000, ratelimit.Batch)
	if err != nil || waited != 0 {
		t.Fatalf("nil limiter: %v, %v", waited, err)
	}
	ls.release(5, true)
	(&limitLease{}).release(0, false)
	l.observe(&ratelimit.Status{Tokens: ratelimit.Window{Known: true}}, &ls, true)
	l.pause(time.Now().Add(time.Hour))
	l.evict(time.Hour)
	if l.InFlight() != 0 {
		t.Fatal("nil limiter has requests in flight")
	}
	if newKeyLimiter(Limits{}, &limiterConfig{}) != nil {
		t.Fatal("zero Limits gave a limiter")
	}
}

func TestLimiterCanceledContextBeforeWaiting(t *testing.T) {
	l := newTestLimiter(t, Limits{RPM: 60, MaxConcurrent: 1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := l.acquire(ctx, 1, ratelimit.Interactive); !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire with a canceled context: %v", err)
	}
	if l.InFlight() != 0 {
		t.Fatal("a failed acquire left a request in flight")
	}
}

func TestLimiterSlotWaitBoundedByMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, Limits{MaxConcurrent: 1}, func(c *limiterConfig) { c.maxWait = time.Second })
		held, _, err := l.acquire(t.Context(), 1, ratelimit.Interactive)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, waited, err := l.acquire(t.Context(), 1, ratelimit.Interactive)
		if !errors.Is(err, ErrRateLimited) || waited != time.Second || time.Since(start) != time.Second {
			t.Fatalf("slot wait: %v after %v, want ErrRateLimited after 1s", err, waited)
		}
		held.release(0, true)
		ls, _, err := l.acquire(t.Context(), 1, ratelimit.Interactive)
		if err != nil {
			t.Fatalf("after release: %v", err)
		}
		ls.release(0, true)
	})
}
