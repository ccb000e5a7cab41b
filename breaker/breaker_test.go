package breaker_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient/breaker"
)

func newBreaker(t *testing.T, cfg breaker.Config) *breaker.Breaker {
	t.Helper()
	b, err := breaker.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

// call makes one request through b with outcome o; it fails the test when Allow refuses.
func call(t *testing.T, b *breaker.Breaker, o breaker.Outcome) {
	t.Helper()
	p, err := b.Allow()
	if err != nil {
		t.Fatalf("Allow in state %v: %v", b.State(), err)
	}
	p.Done(o)
}

func callN(t *testing.T, b *breaker.Breaker, o breaker.Outcome, n int) {
	t.Helper()
	for range n {
		call(t, b, o)
	}
}

func wantState(t *testing.T, b *breaker.Breaker, want breaker.State) {
	t.Helper()
	if got := b.State(); got != want {
		t.Fatalf("State() = %v, want %v", got, want)
	}
}

// trip opens a closed breaker with consecutive failures.
func trip(t *testing.T, b *breaker.Breaker, consecutive int) {
	t.Helper()
	callN(t, b, breaker.Failure, consecutive)
	wantState(t, b, breaker.Open)
}

// recorder collects OnStateChange calls.
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) record(from, to breaker.State) {
	r.mu.Lock()
	r.got = append(r.got, from.String()+">"+to.String())
	r.mu.Unlock()
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.got, " ")
}

func TestBreakerTripRules(t *testing.T) {
	ratio := breaker.Config{MinRequests: 20, FailureRatio: 0.5, ConsecutiveFailures: 1000}
	run := breaker.Config{MinRequests: 1000, ConsecutiveFailures: 5}
	small := breaker.Config{MinRequests: 4, FailureRatio: 0.5, ConsecutiveFailures: 100}
	tests := []struct {
		name string
		cfg  breaker.Config
		// outcomes: S success, F failure, I ignore.
		outcomes string
		// tripAt is the 1-based outcome after which the breaker is open; 0: never.
		tripAt int
	}{
		{"ratio reached at min volume", ratio, strings.Repeat("SF", 10), 20},
		{"ratio reached after volume", ratio, strings.Repeat("S", 10) + strings.Repeat("F", 10), 20},
		{"ratio just below threshold", ratio, strings.Repeat("SSF", 30), 0},
		{"failures below min volume", ratio, strings.Repeat("F", 19), 0},
		{"a success never trips", ratio, strings.Repeat("F", 19) + "S", 0},
		{"ratio trips on next failure", ratio, strings.Repeat("F", 19) + "SF", 21},
		{"consecutive run", run, "SFFFFSFFFFF", 11},
		{"success breaks a run", run, strings.Repeat("FFFFS", 20), 0},
		{"ignore neither extends nor breaks a run", run, "FFFFIIIIIIIIIIF", 15},
		{"ignore is not volume", small, "IIIIIIIIIIFSF", 0},
		{"ignore does not dilute the ratio", small, "FF" + strings.Repeat("I", 40) + "SF", 44},
		{"only ignores", small, strings.Repeat("I", 1000), 0},
		{"zero config: 10 consecutive", breaker.Config{}, strings.Repeat("F", 10), 10},
		{"zero config: 9 consecutive", breaker.Config{}, strings.Repeat("F", 9) + "S" + strings.Repeat("F", 9), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBreaker(t, tt.cfg)
				for i, c := range tt.outcomes {
					o := map[rune]breaker.Outcome{'S': breaker.Success, 'F': breaker.Failure, 'I': breaker.Ignore}[c]
					call(t, b, o)
					want := breaker.Closed
					if tt.tripAt != 0 && i+1 >= tt.tripAt {
						want = breaker.Open
					}
					if got := b.State(); got != want {
						t.Fatalf("after outcome %d (%c): state %v, want %v", i+1, c, got, want)
					}
					if want == breaker.Open {
						return
					}
				}
			})
		})
	}
}

func TestBreakerWindowSlides(t *testing.T) {
	cfg := breaker.Config{Window: 10 * time.Second, Buckets: 10, MinRequests: 10, FailureRatio: 0.5, ConsecutiveFailures: 1000}
	tests := []struct {
		name     string
		wait     time.Duration // between 9 failures and the 10th
		wantOpen bool
		wantFail int // failures in the window after the 10th, when still closed
	}{
		{"same bucket", 0, true, 0},
		{"half a window later", 5 * time.Second, true, 0},
		{"just inside the oldest bucket", 10*time.Second - time.Nanosecond, true, 0},
		{"oldest bucket dropped", 10 * time.Second, false, 1},
		{"long idle", time.Hour, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBreaker(t, cfg)
				callN(t, b, breaker.Failure, 9)
				time.Sleep(tt.wait)
				call(t, b, breaker.Failure)
				s := b.Snapshot()
				if got := s.State == breaker.Open; got != tt.wantOpen {
					t.Fatalf("open = %v, want %v (snapshot %+v)", got, tt.wantOpen, s)
				}
				if !tt.wantOpen && s.Failures != tt.wantFail {
					t.Fatalf("Failures in window = %d, want %d", s.Failures, tt.wantFail)
				}
			})
		})
	}
}

// TestBreakerDefaultsIgnoreNoise drives thousands of calls at the transient failure rates
// that are normal for LLM upstreams through a default breaker, at several traffic volumes;
// the rows that must trip show the harness can tell.
func TestBreakerDefaultsIgnoreNoise(t *testing.T) {
	tests := []struct {
		failRate float64
		perMin   float64
		calls    int
		wantTrip bool
	}{
		{0.2, 20, 5000, false},
		{0.2, 50, 5000, false},
		{0.2, 60, 5000, false},
		{0.2, 120, 5000, false},
		{0.2, 1200, 5000, false},
		{0.1, 60, 5000, false},
		{1.0, 20, 5000, true},   // hard outage on a quiet upstream: consecutive rule
		{0.7, 1200, 5000, true}, // brownout on a busy upstream
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("fail=%v/perMin=%v", tt.failRate, tt.perMin), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var changes recorder
				cfg := breaker.DefaultConfig()
				cfg.OnStateChange = changes.record
				b := newBreaker(t, cfg)
				rng := rand.New(rand.NewPCG(42, uint64(tt.perMin)))
				mean := float64(time.Minute) / tt.perMin
				rejected := 0
				for range tt.calls {
					time.Sleep(time.Duration(rng.ExpFloat64() * mean))
					p, err := b.Allow()
					if err != nil {
						rejected++
						continue
					}
					o := breaker.Success
					if rng.Float64() < tt.failRate {
						o = breaker.Failure
					}
					p.Done(o)
				}
				tripped := changes.String() != ""
				if tripped != tt.wantTrip {
					t.Fatalf("tripped = %v, want %v; changes %q, %d rejected", tripped, tt.wantTrip, changes.String(), rejected)
				}
			})
		})
	}
}

func TestBreakerOpenRejects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker(t, breaker.DefaultConfig())
		trip(t, b, breaker.DefaultConsecutiveFailures)
		for range 100 {
			p, err := b.Allow()
			if !errors.Is(err, breaker.ErrOpen) {
				t.Fatalf("Allow while open: err = %v, want ErrOpen", err)
			}
			if p != (breaker.Permit{}) {
				t.Fatalf("Allow while open returned a permit %+v", p)
			}
		}
		s := b.Snapshot()
		if s.State != breaker.Open || s.OpenRemaining != breaker.DefaultOpenTimeout || s.Trips != 1 {
			t.Fatalf("Snapshot = %+v, want open for %v after 1 trip", s, breaker.DefaultOpenTimeout)
		}
	})
}

func TestBreakerHalfOpenAfterOpenTimeout(t *testing.T) {
	for _, via := range []string{"State", "Allow"} {
		t.Run(via, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBreaker(t, breaker.DefaultConfig())
				trip(t, b, breaker.DefaultConsecutiveFailures)
				time.Sleep(breaker.DefaultOpenTimeout - time.Nanosecond)
				if _, err := b.Allow(); !errors.Is(err, breaker.ErrOpen) {
					t.Fatalf("Allow 1ns before the open time ends: err = %v, want ErrOpen", err)
				}
				wantState(t, b, breaker.Open)
				time.Sleep(time.Nanosecond)
				if via == "Allow" {
					p, err := b.Allow()
					if err != nil || !p.Probe() {
						t.Fatalf("Allow after the open time: probe=%v err=%v, want a probe", p.Probe(), err)
					}
				}
				wantState(t, b, breaker.HalfOpen)
			})
		})
	}
}

func TestBreakerHalfOpenAdmitsExactlyProbes(t *testing.T) {
	for _, probes := range []int{1, 3, 7} {
		t.Run(fmt.Sprint(probes), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := breaker.DefaultConfig()
				cfg.HalfOpenProbes, cfg.SuccessesToClose = probes, 0
				b := newBreaker(t, cfg)
				trip(t, b, cfg.ConsecutiveFailures)
				time.Sleep(cfg.OpenTimeout)

				const callers = 100
				var (
					start    = make(chan struct{})
					wg       sync.WaitGroup
					mu       sync.Mutex
					permits  []breaker.Permit
					rejected atomic.Int32
				)
				for range callers {
					wg.Go(func() {
						<-start
						p, err := b.Allow()
						switch {
						case err == nil:
							mu.Lock()
							permits = append(permits, p)
							mu.Unlock()
						case errors.Is(err, breaker.ErrOpen):
							rejected.Add(1)
						default:
							t.Errorf("Allow: unexpected error %v", err)
						}
					})
				}
				synctest.Wait() // every caller is parked on start
				close(start)
				wg.Wait()
				if len(permits) != probes || int(rejected.Load()) != callers-probes {
					t.Fatalf("admitted %d, rejected %d; want %d and %d", len(permits), rejected.Load(), probes, callers-probes)
				}
				for i, p := range permits {
					if !p.Probe() {
						t.Fatalf("permit %d is not a probe", i)
					}
					wantState(t, b, breaker.HalfOpen)
					p.Done(breaker.Success)
				}
				wantState(t, b, breaker.Closed)
			})
		})
	}
}

func TestBreakerClosesAfterProbeSuccesses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := breaker.Config{ConsecutiveFailures: 3, HalfOpenProbes: 2, SuccessesToClose: 5, OpenTimeout: time.Second}
		b := newBreaker(t, cfg)
		trip(t, b, 3)
		time.Sleep(time.Second)
		// Probes come in rounds of two as earlier ones finish.
		for i := range 4 {
			p, err := b.Allow()
			if err != nil {
				t.Fatalf("probe %d: %v", i+1, err)
			}
			p.Done(breaker.Success)
			wantState(t, b, breaker.HalfOpen)
		}
		call(t, b, breaker.Success)
		wantState(t, b, breaker.Closed)
		s := b.Snapshot()
		if s.Successes != 0 || s.Failures != 0 || s.Trips != 0 {
			t.Fatalf("after closing, Snapshot = %+v, want a fresh window", s)
		}
		// A fresh window: the old failures are forgotten, the run starts over.
		callN(t, b, breaker.Failure, 2)
		wantState(t, b, breaker.Closed)
		call(t, b, breaker.Failure)
		// And the open time is back to its base.
		if s := b.Snapshot(); s.State != breaker.Open || s.OpenRemaining != time.Second {
			t.Fatalf("after re-tripping, Snapshot = %+v, want open for 1s", s)
		}
	})
}

// openFor asserts that b, just opened, stays open for exactly d of virtual time.
func openFor(t *testing.T, b *breaker.Breaker, d time.Duration) {
	t.Helper()
	time.Sleep(d - time.Nanosecond)
	wantState(t, b, breaker.Open)
	time.Sleep(time.Nanosecond)
	wantState(t, b, breaker.HalfOpen)
}

func TestBreakerReopenBacksOff(t *testing.T) {
	tests := []struct {
		name string
		cfg  breaker.Config
		want []time.Duration // open time after the trip and after each failed probe
	}{
		{"defaults", breaker.DefaultConfig(), []time.Duration{
			15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute,
		}},
		{"cap between doublings", breaker.Config{OpenTimeout: 10 * time.Second, MaxOpenTimeout: 35 * time.Second}, []time.Duration{
			10 * time.Second, 20 * time.Second, 35 * time.Second, 35 * time.Second,
		}},
		{"no growth when max equals base", breaker.Config{OpenTimeout: time.Minute, MaxOpenTimeout: time.Minute}, []time.Duration{
			time.Minute, time.Minute, time.Minute,
		}},
		{"max defaults to a longer base", breaker.Config{OpenTimeout: 10 * time.Minute}, []time.Duration{
			10 * time.Minute, 10 * time.Minute,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBreaker(t, tt.cfg)
				for round := range 2 { // the second round checks the reset after closing
					trip(t, b, breaker.DefaultConsecutiveFailures)
					for i, d := range tt.want {
						openFor(t, b, d)
						if i == len(tt.want)-1 {
							break
						}
						call(t, b, breaker.Failure) // a failed probe
						if s := b.Snapshot(); s.Trips != i+2 {
							t.Fatalf("round %d: Trips = %d, want %d", round, s.Trips, i+2)
						}
					}
					callN(t, b, breaker.Success, breaker.DefaultHalfOpenProbes)
					wantState(t, b, breaker.Closed)
				}
			})
		})
	}
}

func TestBreakerProbeIgnoreFreesSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBreaker(t, breaker.Config{ConsecutiveFailures: 1, HalfOpenProbes: 2, OpenTimeout: time.Second})
		trip(t, b, 1)
		time.Sleep(time.Second)
		p1, err1 := b.Allow()
		p2, err2 := b.Allow()
		if err1 != nil || err2 != nil {
			t.Fatalf("probes: %v, %v", err1, err2)
		}
		if _, err := b.Allow(); !errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("third probe: err = %v, want ErrOpen", err)
		}
		p1.Done(breaker.Ignore)
		if s := b.Snapshot(); s.State != breaker.HalfOpen || s.ProbesInFlight != 1 {
			t.Fatalf("after an ignored probe: %+v, want half-open with 1 probe out", s)
		}
		p3, err := b.Allow()
		if err != nil {
			t.Fatalf("probe after an ignored one: %v", err)
		}
		p2.Done(breaker.Success)
		wantState(t, b, breaker.HalfOpen) // the ignore was no success
		p3.Done(breaker.Success)
		wantState(t, b, breaker.Closed)
	})
}

func TestBreakerStaleGeneration(t *testing.T) {
	t.Run("closed permits after a trip", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newBreaker(t, breaker.Config{ConsecutiveFailures: 3, OpenTimeout: time.Second, HalfOpenProbes: 1})
			var stale []breaker.Permit
			for range 10 {
				p, err := b.Allow()
				if err != nil {
					t.Fatal(err)
				}
				stale = append(stale, p)
			}
			trip(t, b, 3)
			for _, p := range stale[:5] {
				p.Done(breaker.Success)
			}
			if s := b.Snapshot(); s.State != breaker.Open || s.OpenRemaining != time.Second {
				t.Fatalf("stale successes changed the open breaker: %+v", s)
			}
			time.Sleep(time.Second)
			probe, err := b.Allow()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range stale[5:] {
				p.Done(breaker.Failure)
			}
			wantState(t, b, breaker.HalfOpen)
			probe.Done(breaker.Success)
			wantState(t, b, breaker.Closed)
		})
	})
	t.Run("probes of an earlier half-open round", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newBreaker(t, breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, HalfOpenProbes: 2})
			trip(t, b, 1)
			time.Sleep(time.Second)
			p1, _ := b.Allow()
			p2, _ := b.Allow()
			p1.Done(breaker.Failure)
			openFor(t, b, 2*time.Second)
			q1, err1 := b.Allow()
			q2, err2 := b.Allow()
			if err1 != nil || err2 != nil {
				t.Fatalf("new round's probes: %v, %v", err1, err2)
			}
			p2.Done(breaker.Success) // stale: neither a success nor a freed slot
			if _, err := b.Allow(); !errors.Is(err, breaker.ErrOpen) {
				t.Fatalf("a stale Done freed a slot of the new round: err = %v", err)
			}
			q1.Done(breaker.Success)
			wantState(t, b, breaker.HalfOpen)
			q2.Done(breaker.Success)
			wantState(t, b, breaker.Closed)
		})
	})
	t.Run("permits of an earlier closed period", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newBreaker(t, breaker.Config{ConsecutiveFailures: 2, OpenTimeout: time.Second, HalfOpenProbes: 1})
			var stale []breaker.Permit
			for range 5 {
				p, _ := b.Allow()
				stale = append(stale, p)
			}
			trip(t, b, 2)
			time.Sleep(time.Second)
			call(t, b, breaker.Success)
			wantState(t, b, breaker.Closed)
			for _, p := range stale {
				p.Done(breaker.Failure)
			}
			if s := b.Snapshot(); s.State != breaker.Closed || s.Failures != 0 {
				t.Fatalf("stale failures counted: %+v", s)
			}
		})
	})
}

// TestBreakerCallbackReentrant runs in real time so that a deadlock shows as a timeout
// rather than a hung bubble: the callback uses every method of the breaker, and the probe
// it takes in one callback reopens the breaker, a change made from inside a callback.
func TestBreakerCallbackReentrant(t *testing.T) {
	var (
		changes recorder
		b       *breaker.Breaker
	)
	cfg := breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Millisecond, HalfOpenProbes: 1}
	cfg.OnStateChange = func(from, to breaker.State) {
		changes.record(from, to)
		_ = b.State()
		_ = b.Snapshot()
		if to == breaker.HalfOpen && changes.String() == "closed>open open>half-open" {
			if p, err := b.Allow(); err == nil {
				p.Done(breaker.Failure)
			}
		}
	}
	b = newBreaker(t, cfg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p, _ := b.Allow()
		p.Done(breaker.Failure)
		time.Sleep(2 * time.Millisecond) // past the open time
		_ = b.State()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("deadlock: a breaker method called from OnStateChange did not return")
	}
	// A slow machine may see more changes after these (the open times are real and short).
	if got, want := changes.String(), "closed>open open>half-open half-open>open"; !strings.HasPrefix(got, want) {
		t.Fatalf("changes = %q, want %q first", got, want)
	}
}

func TestBreakerOnStateChangeSequence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			changes recorder
			b       *breaker.Breaker
			seen    []breaker.State
		)
		cfg := breaker.Config{ConsecutiveFailures: 2, OpenTimeout: time.Second, HalfOpenProbes: 1}
		cfg.OnStateChange = func(from, to breaker.State) {
			changes.record(from, to)
			seen = append(seen, b.State()) // must not deadlock: no lock is held here
		}
		b = newBreaker(t, cfg)
		trip(t, b, 2)
		openFor(t, b, time.Second)
		call(t, b, breaker.Failure)
		openFor(t, b, 2*time.Second)
		call(t, b, breaker.Success)
		want := "closed>open open>half-open half-open>open open>half-open half-open>closed"
		if got := changes.String(); got != want {
			t.Fatalf("changes:\n got %s\nwant %s", got, want)
		}
		wantSeen := []breaker.State{breaker.Open, breaker.HalfOpen, breaker.Open, breaker.HalfOpen, breaker.Closed}
		if fmt.Sprint(seen) != fmt.Sprint(wantSeen) {
			t.Fatalf("State() inside the callback: %v, want %v", seen, wantSeen)
		}
	})
}

// TestBreakerConcurrent hammers a breaker from many goroutines: under -race it checks the
// locking, and the callback sees an unbroken chain of changes (each from = previous to)
// even though changes are delivered outside the lock, by whichever goroutine is around.
func TestBreakerConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu     sync.Mutex
			last   = breaker.Closed
			broken int
			count  int
			calls  atomic.Int64
		)
		cfg := breaker.Config{
			Window: time.Second, MinRequests: 10, ConsecutiveFailures: 4,
			OpenTimeout: 50 * time.Millisecond, MaxOpenTimeout: 200 * time.Millisecond, HalfOpenProbes: 3,
			OnStateChange: func(from, to breaker.State) {
				// A varying pause lets a later change overtake this one, were delivery not
				// serialized.
				time.Sleep(time.Duration(calls.Add(1)*7%5) * time.Millisecond)
				mu.Lock()
				defer mu.Unlock()
				if from != last {
					broken++
				}
				last = to
				count++
			},
		}
		b := newBreaker(t, cfg)
		var wg sync.WaitGroup
		for g := range 32 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), 7))
				for range 500 {
					p, err := b.Allow()
					if err != nil {
						time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
						continue
					}
					if s := b.Snapshot(); s.ProbesInFlight > cfg.HalfOpenProbes {
						t.Errorf("%d probes in flight, limit %d", s.ProbesInFlight, cfg.HalfOpenProbes)
					}
					time.Sleep(time.Duration(rng.IntN(10)) * time.Millisecond)
					o := breaker.Outcome(rng.IntN(3)) // a third of each
					p.Done(o)
				}
			})
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		if broken != 0 || count == 0 {
			t.Fatalf("%d state changes, %d out of order", count, broken)
		}
	})
}

func TestBreakerConfigValidation(t *testing.T) {
	tests := []struct {
		name string
		cfg  breaker.Config
		want []string // substrings of the error; none: valid
	}{
		{"zero value", breaker.Config{}, nil},
		{"defaults", breaker.DefaultConfig(), nil},
		{"ratio of one", breaker.Config{FailureRatio: 1}, nil},
		{"long base open time, default max", breaker.Config{OpenTimeout: time.Hour}, nil},
		{"many successes to close", breaker.Config{HalfOpenProbes: 1, SuccessesToClose: 10}, nil},
		{"negative window", breaker.Config{Window: -time.Second}, []string{"Window -1s is negative"}},
		{"negative buckets", breaker.Config{Buckets: -1}, []string{"Buckets -1 is outside [1, 1000]"}},
		{"too many buckets", breaker.Config{Buckets: 1001}, []string{"Buckets 1001"}},
		{"slices under 1ms", breaker.Config{Window: 50 * time.Millisecond, Buckets: 100}, []string{"slices under 1ms"}},
		{"negative min requests", breaker.Config{MinRequests: -1}, []string{"MinRequests -1"}},
		{"ratio above one", breaker.Config{FailureRatio: 1.5}, []string{"FailureRatio 1.5 is outside (0, 1]"}},
		{"negative ratio", breaker.Config{FailureRatio: -0.1}, []string{"FailureRatio -0.1"}},
		{"NaN ratio", breaker.Config{FailureRatio: math.NaN()}, []string{"FailureRatio NaN"}},
		{"negative consecutive", breaker.Config{ConsecutiveFailures: -3}, []string{"ConsecutiveFailures -3"}},
		{"negative open time", breaker.Config{OpenTimeout: -time.Second}, []string{"OpenTimeout -1s"}},
		{"negative max open time", breaker.Config{MaxOpenTimeout: -time.Second}, []string{"MaxOpenTimeout -1s"}},
		{"max below base", breaker.Config{OpenTimeout: time.Minute, MaxOpenTimeout: time.Second}, []string{"MaxOpenTimeout 1s is below OpenTimeout 1m0s"}},
		{"negative probes", breaker.Config{HalfOpenProbes: -1}, []string{"HalfOpenProbes -1"}},
		{"negative successes", breaker.Config{SuccessesToClose: -1}, []string{"SuccessesToClose -1"}},
		{"slow ratio above one", breaker.Config{SlowCallRatio: 1.01}, []string{"SlowCallRatio 1.01 is outside (0, 1]"}},
		{"NaN slow ratio", breaker.Config{SlowCallRatio: math.NaN()}, []string{"SlowCallRatio NaN"}},
		{"negative slow ratio", breaker.Config{SlowCallRatio: -1}, []string{"SlowCallRatio -1"}},
		{"negative slow call", breaker.Config{SlowCall: -time.Second}, []string{"SlowCall -1s"}},
		{"negative slow first token", breaker.Config{SlowFirstToken: -time.Second}, []string{"SlowFirstToken -1s"}},
		{"huge slow thresholds", breaker.Config{SlowCall: math.MaxInt64, SlowFirstToken: math.MaxInt64}, nil},
		{"every problem at once", breaker.Config{Window: -1, FailureRatio: 2, HalfOpenProbes: -1}, []string{"Window", "FailureRatio", "HalfOpenProbes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := breaker.New(tt.cfg)
			if len(tt.want) == 0 {
				if err != nil || b == nil {
					t.Fatalf("New: %v, want a breaker", err)
				}
				return
			}
			if err == nil || b != nil {
				t.Fatalf("New = %v, %v; want an error", b, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "llmclient: breaker: ") {
				t.Errorf("error %q does not start with %q", msg, "llmclient: breaker: ")
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}

func TestDefaultBreakerConfig(t *testing.T) {
	want := breaker.Config{
		Window: time.Minute, Buckets: 10, MinRequests: 50, FailureRatio: 0.5, ConsecutiveFailures: 10,
		OpenTimeout: 15 * time.Second, MaxOpenTimeout: 5 * time.Minute, HalfOpenProbes: 3, SuccessesToClose: 3,
		SlowCallRatio: 0.8, SlowCall: 5 * time.Minute, SlowFirstToken: time.Minute,
	}
	if got := breaker.DefaultConfig(); fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Fatalf("DefaultConfig() = %+v, want %+v", got, want)
	}
}

func TestBreakerNilAndZeroPermit(t *testing.T) {
	var b *breaker.Breaker
	p, err := b.Allow()
	if err != nil {
		t.Fatalf("nil breaker: Allow: %v", err)
	}
	p.Done(breaker.Failure)
	if b.State() != breaker.Closed || b.Snapshot() != (breaker.Snapshot{}) {
		t.Fatal("nil breaker is not closed")
	}
	breaker.Permit{}.Done(breaker.Success) // must not panic
}

func TestBreakerStrings(t *testing.T) {
	tests := []struct{ got, want string }{
		{breaker.Closed.String(), "closed"},
		{breaker.Open.String(), "open"},
		{breaker.HalfOpen.String(), "half-open"},
		{breaker.State(9).String(), "unknown"},
		{breaker.Success.String(), "success"},
		{breaker.Failure.String(), "failure"},
		{breaker.Ignore.String(), "ignore"},
		{breaker.Slow.String(), "slow"},
		{breaker.Outcome(9).String(), "unknown"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("String() = %q, want %q", tt.got, tt.want)
		}
	}
}

func BenchmarkBreaker(b *testing.B) {
	b.Run("closed/serial", func(b *testing.B) {
		br, _ := breaker.New(breaker.DefaultConfig())
		b.ReportAllocs()
		for b.Loop() {
			p, err := br.Allow()
			if err != nil {
				b.Fatal(err)
			}
			p.Done(breaker.Success)
		}
	})
	b.Run("closed/parallel", func(b *testing.B) {
		br, _ := breaker.New(breaker.DefaultConfig())
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p, err := br.Allow()
				if err != nil {
					b.Error(err)
					return
				}
				p.Done(breaker.Success)
			}
		})
	})
	b.Run("open/parallel", func(b *testing.B) {
		br, _ := breaker.New(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Hour})
		p, _ := br.Allow()
		p.Done(breaker.Failure)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := br.Allow(); err == nil {
					b.Error("open breaker admitted a request")
					return
				}
			}
		})
	})
}

func ExampleBreaker() {
	b, err := breaker.New(breaker.Config{ConsecutiveFailures: 3})
	if err != nil {
		panic(err)
	}
	for range 3 {
		p, err := b.Allow()
		if err != nil {
			break
		}
		// ... call the upstream, then report how it went:
		p.Done(breaker.Failure)
	}
	_, err = b.Allow()
	fmt.Println(b.State(), errors.Is(err, breaker.ErrOpen))
	// Output: open true
}
