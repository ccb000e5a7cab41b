package redisstore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
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
	return &llmclient.Response{Text: "ok", FinishReason: llmclient.FinishStop,
		Usage: llmclient.Usage{InputTokens: 1, OutputTokens: 1, TotalTokens: 2}}, nil
}

func (u *upstream) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, llmclient.ErrUnsupported
}

// largeRequest is the smallest MaxTokens of the second half's requests.
const largeRequest = 200

type admission struct {
	at     time.Duration // when the upstream saw it, since the start
	tokens int           // what the limiter charged
}

// TestQuotaAcrossReplicas: four Clients, each with its own store and connection, share one
// API key of 600 RPM and 100k TPM with at most 8 requests in flight, for 30 seconds, with
// far more demand than quota. The first half sends small requests (the request bucket
// binds), the second large ones (the token bucket binds). What reaches the upstream must
// stay within the quota in every window (plus the buckets' burst, set to 2% of the quota,
// with 2% to spare for timing), the quota must be used, and the upstream must never see
// more than 8 requests at once.
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
	var (
		mu      sync.Mutex
		charged = make(map[string]int) // request id → tokens charged
		wg      sync.WaitGroup
		stores  []*redisstore.Store
		nextID  atomic.Int64
	)
	// Requests start until the end of the run; those queued by then finish after it.
	ctx, cancel := context.WithTimeout(context.Background(), run+5*time.Second)
	defer cancel()
	up.start = time.Now()
	for range replicas {
		// A generous timeout: the test is about sharing, not about a CPU-starved runner
		// falling back to local limits.
		s := srv.store(redisstore.WithTimeout(500 * time.Millisecond))
		stores = append(stores, s)
		c, err := llmclient.New(
			llmclient.WithUpstream(llmclient.Upstream{Name: "vendor", Provider: up, Keys: []string{"sk-shared"}, Limits: limits}),
			llmclient.WithLimitStore(s))
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
					resp, err := c.Complete(ctx, &llmclient.Request{
						Model:     "m",
						Messages:  []llmclient.Message{{Role: llmclient.RoleUser, Content: []llmclient.Part{llmclient.TextPart("hi")}}},
						MaxTokens: maxTokens,
						Metadata:  map[string]string{"id": id},
					})
					if err != nil {
						if !errors.Is(err, llmclient.ErrRateLimited) {
							t.Errorf("Complete: %v", err)
							return
						}
						continue
					}
					a := resp.Attempts[len(resp.Attempts)-1]
					mu.Lock()
					charged[id] = a.EstimatedTokens
					mu.Unlock()
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
	var admitted []admission
	for id, at := range up.arrived {
		tok, ok := charged[id]
		if !ok {
			continue // cut short by the end of the run
		}
		admitted = append(admitted, admission{at, tok})
	}
	slices.SortFunc(admitted, func(a, b admission) int { return int(a.at - b.at) })

	requests := func(admission) float64 { return 1 }
	tokens := func(a admission) float64 { return float64(a.tokens) }
	for _, w := range []time.Duration{10 * time.Second, run, 60 * time.Second} {
		for _, d := range []struct {
			name        string
			weight      func(admission) float64
			rate, burst float64
			quota       float64
		}{
			{"requests", requests, rpm / 60.0, float64(limits.RequestBurst), rpm},
			{"tokens", tokens, tpm / 60.0, float64(limits.TokenBurst), tpm},
		} {
			got := maxWindow(admitted, w, d.weight)
			bound := d.burst + 1.02*d.rate*w.Seconds()
			t.Logf("%s in the busiest %v window: %.0f (bound: burst + 1.02 × quota rate = %.0f)", d.name, w, got, bound)
			if got > bound {
				t.Errorf("%s: %.0f in a %v window, over the bound %.0f", d.name, got, w, bound)
			}
			if w == 60*time.Second && got > 1.02*d.quota {
				t.Errorf("%s: %.0f in a 60s window, more than 2%% over the quota %.0f", d.name, got, d.quota)
			}
		}
	}
	// The quota was used: the replicas together admitted what one limiter would have,
	// requests while the requests were small, tokens once they were large. (Queued requests
	// reach the upstream seconds after they are made, so the phases are told apart by the
	// requests' size, not by the time they were made.)
	var lastSmall, firstLarge, lastLarge time.Duration
	for _, a := range admitted {
		if a.tokens < largeRequest {
			lastSmall = a.at
		} else {
			if firstLarge == 0 {
				firstLarge = a.at
			}
			lastLarge = a.at
		}
	}
	var smallPhaseReq, largePhaseTok float64
	for _, a := range admitted {
		if a.at <= lastSmall {
			smallPhaseReq++
		}
		if a.at >= firstLarge && a.at <= lastLarge {
			largePhaseTok += float64(a.tokens)
		}
	}
	wantReq := rpm / 60.0 * lastSmall.Seconds()
	wantTok := tpm / 60.0 * (lastLarge - firstLarge).Seconds()
	t.Logf("small requests: %.0f requests in %v (%.1f%% of the quota rate); large: %.0f tokens in %v (%.1f%%); at most %d of %d in flight",
		smallPhaseReq, lastSmall.Round(time.Millisecond), 100*smallPhaseReq/wantReq,
		largePhaseTok, (lastLarge - firstLarge).Round(time.Millisecond), 100*largePhaseTok/wantTok, up.maxInCall.Load(), slots)
	if smallPhaseReq < 0.97*wantReq {
		t.Errorf("small requests: %.0f admitted, want about %.0f", smallPhaseReq, wantReq)
	}
	if largePhaseTok < 0.97*wantTok {
		t.Errorf("large requests: %.0f tokens admitted, want about %.0f", largePhaseTok, wantTok)
	}
	if m := up.maxInCall.Load(); m > slots || m < 2 {
		t.Errorf("at most %d requests in flight, want at most %d (and some)", m, slots)
	}
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
