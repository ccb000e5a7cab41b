package redisstore_test

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/redisstore"
)

// upstream is a Provider standing for the vendor behind one API key: it notes when each
// request reached it and how many were in flight at once.
type upstream struct {
	mu        sync.Mutex
	arrived   map[string]time.Duration // request id → arrival, since start
	start     time.Time
	inCall    atomic.Int64
	maxInCall atomic.Int64
}

func (u *upstream) Complete(ctx context.Context, call *llmclient.Call) (*llmclient.Response, error) {
	at := time.Since(u.start)
	n := u.inCall.Add(1)
	defer u.inCall.Add(-1)
	for cur := u.maxInCall.Load(); n > cur && !u.maxInCall.CompareAndSwap(cur, n); cur = u.maxInCall.Load() {
	}
	u.mu.Lock()
	u.arrived[call.Request.Metadata["id"]] = at
	u.mu.Unlock()
	t := time.NewTimer(time.Duration(20+rand.IntN(130)) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &llmclient.Response{Text: "ok", FinishReason: finish.Stop,
		Usage: llmclient.Usage{InputTokens: 1, OutputTokens: 1, TotalTokens: 2}}, nil
}

func (u *upstream) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, llmclient.ErrUnsupported
}

// largeRequest is the smallest MaxTokens of the second half's requests.
const largeRequest = 200

// reserved is one main-lane reservation a store admitted: when the call started and
// returned, on the test's clock (since the run started), and the wait the server computed.
type reserved struct {
	t0, t1 time.Duration
	wait   time.Duration
	tokens int
}

// at returns an upper and a lower bound of the reservation's admission time on the test's
// clock: the server decided at some moment in [t0, t1] and reported the wait rounded up
// to a microsecond.
func (r reserved) at() (hi, lo time.Duration) {
	return r.t1 + r.wait, r.t0 + r.wait - time.Microsecond
}

// admissions records what the stores of a run admitted.
type admissions struct {
	start   time.Time
	mu      sync.Mutex
	log     []reserved
	refused int // reservations refused (none are expected: no deadline, no MaxWait)
	adjusts int // adjustments (none are expected: no failure, usage below the estimate)
}

// recordingStore is a LimitStore that records the main-lane admissions of its states.
type recordingStore struct {
	limitstore.Store
	rec *admissions
}

func (s recordingStore) Open(name string, spec limitstore.Spec) limitstore.State {
	return &recordingState{State: s.Store.Open(name, spec), rec: s.rec}
}

type recordingState struct {
	limitstore.State
	rec *admissions
}

func (s *recordingState) Reserve(ctx context.Context, r limitstore.Reservation) (limitstore.Grant, error) {
	t0 := time.Since(s.rec.start)
	g, err := s.State.Reserve(ctx, r)
	t1 := time.Since(s.rec.start)
	if r.Lane == limitstore.LaneMain && err == nil {
		s.rec.mu.Lock()
		if g.OK {
			s.rec.log = append(s.rec.log, reserved{t0, t1, g.Wait, r.Tokens})
		} else {
			s.rec.refused++
		}
		s.rec.mu.Unlock()
	}
	return g, err
}

func (s *recordingState) Adjust(ctx context.Context, l limitstore.Lane, requests, tokens int) error {
	s.rec.mu.Lock()
	s.rec.adjusts++
	s.rec.mu.Unlock()
	return s.State.Adjust(ctx, l, requests, tokens)
}

// TestQuotaAcrossReplicas: four Clients, each with its own store and connection, share one
// API key of 600 RPM and 100k TPM with at most 8 requests in flight, with far more demand
// than quota: small requests first (the request bucket binds), then large ones (the token
// bucket binds). It checks what the shared buckets decided, on their own timeline, so that
// a loaded machine changes how many requests run but not whether the checks hold:
//
//   - never more than the quota: in every window of length w the admitted requests and
//     tokens stay within the bucket's burst plus the rate times w, plus the rate times u,
//     the longest store call, for not knowing when within a call the server decided;
//   - the quota used: a reservation that had to wait was admitted at most one spacing
//     (the request interval, or its tokens' time) after another admission, which the
//     buckets guarantee; a store that under-admits fails this however slow the machine;
//   - no request reaches the upstream before it was admitted, every request that reaches
//     it was admitted, and the upstream never sees more than 8 at once.
//
// There is no deadline: the workers stop sending after the run, and the queued requests
// finish.
func TestQuotaAcrossReplicas(t *testing.T) {
	const (
		replicas = 4
		workers  = 8 // per replica
		rpm, tpm = 600, 100_000
		slots    = 8
	)
	run := 30 * time.Second
	if testing.Short() {
		run = 10 * time.Second
	}
	limits := llmclient.Limits{RPM: rpm, TPM: tpm, MaxConcurrent: slots, RequestBurst: rpm / 50, TokenBurst: tpm / 50}
	srv := startRedis(t)
	up := &upstream{arrived: make(map[string]time.Duration)}
	rec := &admissions{}
	var (
		wg     sync.WaitGroup
		stores []*redisstore.Store
		nextID atomic.Int64
	)
	// A hang guard only: nothing is expected to come near it.
	ctx, cancel := context.WithTimeout(context.Background(), run+5*time.Minute)
	defer cancel()
	up.start = time.Now()
	rec.start = up.start
	for range replicas {
		// A generous timeout: the test is about sharing, not about a CPU-starved machine
		// falling back to local limits.
		s := srv.store(redisstore.WithTimeout(3*time.Second), redisstore.WithLeaseTTL(10*time.Second))
		stores = append(stores, s)
		c, err := llmclient.New(
			llmclient.WithUpstream(llmclient.Upstream{Name: "vendor", Provider: up, Keys: []string{"sk-shared"}, Limits: limits}),
			llmclient.WithLimitStore(recordingStore{s, rec}))
		if err != nil {
			t.Fatal(err)
		}
		for range workers {
			wg.Go(func() {
				for time.Since(up.start) < run {
					id := strconv.FormatInt(nextID.Add(1), 10)
					maxTokens := 20 + rand.IntN(41) // requests bind: 10/s × ~40 = 400 tokens/s
					if time.Since(up.start) >= run/2 {
						maxTokens = largeRequest + rand.IntN(101) // tokens bind: 1667/s ÷ ~250 = 6.7 requests/s
					}
					_, err := c.Complete(ctx, &llmclient.Request{
						Model:     "m",
						Messages:  []llmclient.Message{{Role: llmclient.RoleUser, Content: []llmclient.Part{llmclient.TextPart("hi")}}},
						MaxTokens: maxTokens,
						Metadata:  map[string]string{"id": id},
					})
					if err != nil {
						t.Errorf("Complete: %v", err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	for _, s := range stores {
		if !s.Healthy() {
			t.Error("a replica fell back to local limits")
		}
	}
	log := rec.log
	if rec.refused != 0 || rec.adjusts != 0 {
		t.Fatalf("%d reservations refused and %d adjustments; want none", rec.refused, rec.adjusts)
	}
	if len(log) != len(up.arrived) {
		t.Fatalf("%d admissions, %d requests reached the upstream; want one each", len(log), len(up.arrived))
	}
	var u time.Duration // how long the longest store call took
	for _, r := range log {
		u = max(u, r.t1-r.t0)
	}
	u += time.Microsecond // the wait's rounding

	// Never more than the quota.
	his := make([]admission, len(log))
	for i, r := range log {
		hi, _ := r.at()
		his[i] = admission{hi, r.tokens}
	}
	slices.SortFunc(his, func(a, b admission) int { return cmp.Compare(a.at, b.at) })
	requests := func(admission) float64 { return 1 }
	tokens := func(a admission) float64 { return float64(a.tokens) }
	for _, w := range []time.Duration{time.Second, 10 * time.Second, run} {
		for _, d := range []struct {
			name        string
			weight      func(admission) float64
			rate, burst float64
		}{
			{"requests", requests, rpm / 60.0, float64(limits.RequestBurst)},
			{"tokens", tokens, tpm / 60.0, float64(limits.TokenBurst)},
		} {
			got := maxWindow(his, w, d.weight)
			bound := d.burst + d.rate*(w+u).Seconds() + 1e-6
			t.Logf("%s in the busiest %v window: %.0f (bound: burst + rate × (window + %v) = %.1f)", d.name, w, got, u, bound)
			if got > bound {
				t.Errorf("%s: %.0f in a %v window, over the bound %.1f", d.name, got, w, bound)
			}
		}
	}

	// The quota used: a waiting reservation's predecessor is at most one spacing before it.
	const requestInterval = time.Minute / rpm
	tokenTime := func(n int) time.Duration { return time.Duration(n) * time.Minute / tpm }
	waited, unexplained := 0, 0
	for k, r := range log {
		if r.wait <= 0 {
			continue
		}
		waited++
		hiK, _ := r.at()
		spacing := max(requestInterval, tokenTime(r.tokens))
		found := false
		for j, q := range log {
			hiJ, _ := q.at()
			if j != k && hiJ >= hiK-spacing-(r.t1-r.t0)-time.Microsecond && hiJ <= hiK+(q.t1-q.t0)+time.Microsecond {
				found = true
				break
			}
		}
		if !found {
			unexplained++
			if unexplained <= 5 {
				t.Errorf("a reservation that waited %v was admitted at %v, more than %v after any other admission: the quota went unused",
					r.wait, hiK, spacing)
			}
		}
	}
	if waited < len(log)/2 {
		t.Errorf("only %d of %d reservations waited: the demand did not exceed the quota", waited, len(log))
	}

	// No request before its admission: the k-th arrival comes after the k-th admission.
	arrivals := make([]time.Duration, 0, len(up.arrived))
	for _, at := range up.arrived {
		arrivals = append(arrivals, at)
	}
	los := make([]time.Duration, len(log))
	for i, r := range log {
		_, los[i] = r.at()
	}
	slices.Sort(arrivals)
	slices.Sort(los)
	for i := range arrivals {
		if arrivals[i] < los[i] {
			t.Fatalf("request %d reached the upstream at %v, before the %d-th admission at %v", i, arrivals[i], i, los[i])
		}
	}

	var small, largeTok float64
	for _, r := range log {
		if r.tokens < largeRequest {
			small++
		} else {
			largeTok += float64(r.tokens)
		}
	}
	span := his[len(his)-1].at - his[0].at
	t.Logf("%d admissions over %v (%d waited, longest store call %v): %.0f small requests, %.0f tokens of large ones; at most %d of %d in flight",
		len(log), span.Round(time.Millisecond), waited, u, small, largeTok, up.maxInCall.Load(), slots)
	if m := up.maxInCall.Load(); m > slots || m < 2 {
		t.Errorf("at most %d requests in flight, want at most %d (and some)", m, slots)
	}
}

// admission is an admission time and what it was charged.
type admission struct {
	at     time.Duration
	tokens int
}

// maxWindow returns the largest total weight of the admissions in any window of length w.
func maxWindow(as []admission, w time.Duration, weight func(admission) float64) float64 {
	var best, sum float64
	j := 0
	for i := range as {
		for j < len(as) && as[j].at < as[i].at+w {
			sum += weight(as[j])
			j++
		}
		best = max(best, sum)
		sum -= weight(as[i])
	}
	return best
}
