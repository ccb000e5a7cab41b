package llmclient_test

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/ratelimit"
	"github.com/llmclient/llmclient/tokenizer/tiktoken"
)

// simUpstream enforces RPM and TPM the way OpenAI documents it: each is a bucket that holds
// a minute's quota and refills continuously; a request is charged its prompt tokens (counted
// exactly, with o200k_base and the chat framing) plus its max tokens when it is admitted, and
// nothing is given back. A request that does not fit gets a 429 with Retry-After and the
// x-ratelimit headers; every response carries the headers.
type simUpstream struct {
	rpm, tpm float64
	latency  time.Duration

	mu         sync.Mutex
	last       time.Time
	reqs, toks float64 // bucket levels
	admitted   int
	charged    float64 // tokens charged to admitted requests before the horizon
	horizon    time.Time
	rejected   int
}

func newSimUpstream(rpm, tpm int, latency time.Duration) *simUpstream {
	return &simUpstream{rpm: float64(rpm), tpm: float64(tpm), latency: latency,
		last: time.Now(), reqs: float64(rpm), toks: float64(tpm)}
}

// exactPrompt counts a request's prompt as the upstream does.
func exactPrompt(req *llmclient.Request) int {
	exact := countFunc(func(_, text string) int {
		n, err := tiktoken.Count(tiktoken.O200kBase, text)
		if err != nil {
			panic(err)
		}
		return n
	})
	return llmclient.EstimatePromptTokens(exact, req)
}

func (s *simUpstream) rateLimits() *ratelimit.Status {
	full := func(level, limit float64) time.Duration {
		return time.Duration((limit - level) / limit * float64(time.Minute))
	}
	return &ratelimit.Status{
		Requests: ratelimit.Window{Known: true, Limit: int64(s.rpm), Remaining: int64(math.Floor(s.reqs)), Reset: full(s.reqs, s.rpm)},
		Tokens:   ratelimit.Window{Known: true, Limit: int64(s.tpm), Remaining: int64(math.Floor(s.toks)), Reset: full(s.toks, s.tpm)},
	}
}

func (s *simUpstream) Complete(ctx context.Context, call *llmclient.Call) (*llmclient.Response, error) {
	prompt := exactPrompt(call.Request)
	charge := float64(prompt + call.Request.MaxTokens)
	s.mu.Lock()
	now := time.Now()
	dt := now.Sub(s.last).Minutes()
	s.last = now
	s.reqs = min(s.rpm, s.reqs+dt*s.rpm)
	s.toks = min(s.tpm, s.toks+dt*s.tpm)
	if s.reqs < 1 || s.toks < charge {
		wait := max((1-s.reqs)/s.rpm, (charge-s.toks)/s.tpm) * float64(time.Minute)
		s.rejected++
		rl := s.rateLimits()
		s.mu.Unlock()
		return nil, &llmclient.Error{Class: failure.RateLimited, Status: 429, Code: "rate_limit_exceeded",
			Message: "Rate limit reached", RetryAfter: time.Duration(wait), RateLimits: rl}
	}
	s.reqs--
	s.toks -= charge
	s.admitted++
	if !now.After(s.horizon) {
		s.charged += charge
	}
	rl := s.rateLimits()
	s.mu.Unlock()

	select {
	case <-time.After(s.latency):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	out := call.Request.MaxTokens/4 + rand.IntN(call.Request.MaxTokens*3/4+1)
	return &llmclient.Response{Text: "ok", FinishReason: finish.Stop, RateLimits: rl,
		Usage: llmclient.Usage{InputTokens: prompt, OutputTokens: out, TotalTokens: prompt + out}}, nil
}

func (s *simUpstream) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, llmclient.ErrUnsupported
}

// simPrompts are requests of mixed languages and sizes cut from the test corpora.
func simPrompts(t *testing.T) []*llmclient.Request {
	t.Helper()
	var texts []string
	for _, name := range []string{"english", "chinese", "code_go", "json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "corpus", name+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, string(b))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var reqs []*llmclient.Request
	for i := range 200 {
		text := []rune(texts[i%len(texts)])
		n := 100 + rng.IntN(len(text)-100)
		from := rng.IntN(len(text) - n + 1)
		reqs = append(reqs, &llmclient.Request{
			Model:     "gpt-4o",
			MaxTokens: []int{256, 512, 1000}[rng.IntN(3)],
			Messages: []llmclient.Message{
				llmclient.SystemMessage("You are a careful assistant. Answer briefly."),
				llmclient.UserMessage(string(text[from : from+n])),
			},
		})
	}
	return reqs
}

// TestLimiterSimulationAgainstOpenAILikeUpstream: four client loops offer twice the TPM
// quota for three virtual minutes, and for ten (once the upstream's minute-sized bucket no
// longer hides an excess); the limiter keeps them under the upstream's limits (no 429)
// while using at least 90% of the quota. Their queue is four calls long, well within their
// 30 s deadlines: bounded queueing, on by default, refuses none of them (any error fails
// the test).
func TestLimiterSimulationAgainstOpenAILikeUpstream(t *testing.T) {
	if _, err := tiktoken.Count(tiktoken.O200kBase, "warm up"); err != nil { // load outside the bubble
		t.Fatal(err)
	}
	reqs := simPrompts(t)
	for _, duration := range []time.Duration{3 * time.Minute, 10 * time.Minute} {
		t.Run(duration.String(), func(t *testing.T) { simulate(t, reqs, duration, 1, 0) })
	}
}

// TestLimiterSimulationProcessesShareAKey: the same load from two and from three Clients
// (processes) that share one API key, each configured with the key's whole quota and no
// shared store. The upstream's headers make them slow down together: almost no 429s, and
// the quota is still used.
func TestLimiterSimulationProcessesShareAKey(t *testing.T) {
	if _, err := tiktoken.Count(tiktoken.O200kBase, "warm up"); err != nil {
		t.Fatal(err)
	}
	reqs := simPrompts(t)
	for _, processes := range []int{2, 3} {
		t.Run(strconv.Itoa(processes), func(t *testing.T) {
			simulate(t, reqs, 10*time.Minute, processes, 0.02)
		})
	}
}

// simulate runs four client loops spread over the given number of Clients against one
// simUpstream, and allows 429s for at most maxRejected of the admitted requests.
func simulate(t *testing.T, reqs []*llmclient.Request, duration time.Duration, processes int, maxRejected float64) {
	synctest.Test(t, func(t *testing.T) {
		const rpm, tpm = 60, 60_000
		// Each loop sends back to back: the upstream's latency sets what four loops offer,
		// here twice the quota.
		var avg float64
		for _, r := range reqs {
			avg += float64(exactPrompt(r)+r.MaxTokens) / float64(len(reqs))
		}
		latency := time.Duration(4 * avg / (2 * tpm) * float64(time.Minute))
		sim := newSimUpstream(rpm, tpm, latency)
		start := time.Now()
		sim.horizon = start.Add(duration)
		var clients []*llmclient.Client
		for range processes {
			c, err := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{
				Name: "sim", Provider: sim, Limits: llmclient.Limits{RPM: rpm, TPM: tpm},
			}))
			if err != nil {
				t.Fatal(err)
			}
			clients = append(clients, c)
		}
		var wg sync.WaitGroup
		for loop := range 4 {
			wg.Go(func() {
				c := clients[loop%processes]
				for i := loop; time.Since(start) < duration; i += 4 {
					req := reqs[i%len(reqs)]
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					_, err := c.Complete(ctx, req)
					cancel()
					if err != nil && maxRejected == 0 {
						t.Errorf("loop %d: %v", loop, err)
						return
					}
				}
			})
		}
		wg.Wait()

		sim.mu.Lock()
		defer sim.mu.Unlock()
		quota := float64(tpm) * duration.Minutes()
		t.Logf("latency %v, mean cost %.0f tokens; admitted %d requests, %d upstream 429s, %.0f tokens charged in %v = %.1f%% of the %.0f quota",
			latency, avg, sim.admitted, sim.rejected, sim.charged, duration, 100*sim.charged/quota, quota)
		if float64(sim.rejected) > maxRejected*float64(sim.admitted) {
			t.Errorf("upstream answered 429 %d times for %d admitted requests", sim.rejected, sim.admitted)
		}
		if sim.charged < 0.9*quota {
			t.Errorf("used %.1f%% of the quota, want ≥ 90%%", 100*sim.charged/quota)
		}
		// The loops were throttled to about half of what they offered.
		if unthrottled := 4 * duration.Seconds() / latency.Seconds(); float64(sim.admitted) > 0.7*unthrottled {
			t.Errorf("%d requests admitted of %.0f offered: the loops were not throttled", sim.admitted, unthrottled)
		}
	})
}

// countFunc adapts a function to estimate.Estimator.
type countFunc func(model, text string) int

func (f countFunc) CountTokens(model, text string) int { return f(model, text) }
