package quotasim

import (
	"context"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/ratelimit"
)

// Upstreams that meter like Anthropic and like Gemini, each enforcing every quantity over
// a 6-second quantum of its per-minute rate, as the OpenAI-like one does.
//
//   - Anthropic-like: requests, input tokens (ITPM) and output tokens (OTPM) per minute,
//     one total for a model class (two model versions draw from it). Input read from the
//     prompt cache is free: a third of the prompts have 70% of their tokens cached.
//     Output counts as generated: a request is refused when the output bucket is empty,
//     and its actual output is taken from the bucket when it ends (max_tokens does not
//     count). Every answer carries the requests, input-token and output-token windows
//     (anthropic-ratelimit-*), as read when the request was admitted.
//   - Gemini-like: requests and input tokens per minute for the project, whichever of the
//     project's three API keys calls; no rate-limit headers; a 429 carries a retry delay.
//
// The Clients name the vendor's quota in a quota scope (WithQuotaScope): the model class,
// or the project. No header tells the output or the project's window, so the Clients'
// buckets hold three seconds' worth (WithBurstFraction(0.05)), under the upstream's
// quantum.

// Vendor is a simulated vendor's metering and the quantity that binds.
type Vendor struct {
	Name string
	// anthropic: ITPM/OTPM, cache reads free, output on usage; else Gemini-like.
	anthropic bool
	rpm       int
	itpm      int // Anthropic's input tokens, Gemini's (input-only) TPM
	otpm      int // Anthropic only
	// bindsOutput: arrivals are at twice the output quota (else the input quota), which
	// is the quantity whose use is measured.
	bindsOutput bool
}

// Vendors are the vendor simulations: Anthropic-like with its input quota binding, then
// its output quota binding, and Gemini-like.
var Vendors = []Vendor{
	{Name: "anthropic ITPM-bound", anthropic: true, rpm: 4_000, itpm: 300_000, otpm: 200_000},
	{Name: "anthropic OTPM-bound", anthropic: true, rpm: 4_000, itpm: 2_000_000, otpm: 30_000, bindsOutput: true},
	{Name: "gemini project", rpm: 2_000, itpm: 600_000},
}

// vendorPrompt is a request of a vendor simulation.
type vendorPrompt struct {
	*simPrompt
	req    *llmclient.Request // the prompt's request, for the vendor's model
	cached int                // prompt tokens read from the cache
}

// vendorUpstream is a simulated Anthropic- or Gemini-like upstream.
type vendorUpstream struct {
	v       Vendor
	prompts map[*llmclient.Request]*vendorPrompt
	rng     *rand.Rand

	mu            sync.Mutex
	last          time.Time
	req, in, out  Bucket
	horizon       time.Time
	calls, reject int
	used          float64 // of the binding quantity, by the horizon
}

func newVendorUpstream(v Vendor, prompts []*vendorPrompt, seed uint64) *vendorUpstream {
	q := simQuantum.Minutes()
	b := func(perMin int) Bucket {
		return Bucket{q * float64(perMin), q * float64(perMin), float64(perMin) / 60}
	}
	u := &vendorUpstream{v: v, prompts: map[*llmclient.Request]*vendorPrompt{}, rng: rand.New(rand.NewPCG(seed, 3)),
		last: time.Now(), req: b(v.rpm), in: b(v.itpm), out: b(max(v.otpm, 1))}
	for _, p := range prompts {
		u.prompts[p.req] = p
	}
	return u
}

// ratelimit.Rule is the simulated vendor's metering, as the real adapters say it.
func (u *vendorUpstream) QuotaRule() ratelimit.Rule {
	if u.v.anthropic {
		return ratelimit.Rule{OutputOnUsage: true, CacheReadsFree: true}
	}
	return ratelimit.Rule{InputOnly: true}
}

func window(b *Bucket, limit int) ratelimit.Window {
	return ratelimit.Window{Known: true, Limit: int64(limit), Remaining: int64(max(b.Level, 0)), Reset: max(b.ResetIn(), 0)}
}

func (u *vendorUpstream) rateLimits() *ratelimit.Status {
	if !u.v.anthropic {
		return nil
	}
	return &ratelimit.Status{Requests: window(&u.req, u.v.rpm), InputTokens: window(&u.in, u.v.itpm),
		OutputTokens: window(&u.out, u.v.otpm)}
}

// refill brings every bucket to now; u.mu is held.
func (u *vendorUpstream) refill() time.Time {
	now := time.Now()
	dt := now.Sub(u.last).Seconds()
	u.last = now
	for _, b := range []*Bucket{&u.req, &u.in, &u.out} {
		b.Refill(dt)
	}
	return now
}

func (u *vendorUpstream) Complete(ctx context.Context, call *llmclient.Call) (*llmclient.Response, error) {
	p := u.prompts[call.Request]
	input := float64(p.exact - p.cached) // what counts: cache reads are free
	if !u.v.anthropic {
		input = float64(p.exact)
	}
	u.mu.Lock()
	now := u.refill()
	u.calls++
	if u.req.Level < 1 || u.in.Level < input || u.v.anthropic && u.out.Level <= 0 {
		wait := max((1-u.req.Level)/u.req.Rate, (input-u.in.Level)/u.in.Rate, -u.out.Level/u.out.Rate, 0.001)
		u.reject++
		rl := u.rateLimits()
		u.mu.Unlock()
		return nil, &llmclient.Error{Class: failure.RateLimited, Status: 429, Code: "rate_limit_error",
			Message: "Rate limit reached", RetryAfter: time.Duration(wait * float64(time.Second)), RateLimits: rl}
	}
	u.req.Level--
	u.in.Level -= input
	inHorizon := !now.After(u.horizon)
	if inHorizon && !u.v.bindsOutput {
		u.used += input
	}
	rl := u.rateLimits()
	out := call.Request.MaxTokens/4 + u.rng.IntN(call.Request.MaxTokens*3/4+1)
	u.mu.Unlock()

	latency := 300*time.Millisecond + time.Duration(out)*2*time.Millisecond
	select {
	case <-time.After(latency):
	case <-ctx.Done():
		out = out / 2 // cut off: what was generated still counts
	}
	u.mu.Lock()
	u.refill()
	if u.v.anthropic {
		u.out.Level -= float64(out)
		if inHorizon && u.v.bindsOutput {
			u.used += float64(out)
		}
	}
	u.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &llmclient.Response{Text: "ok", FinishReason: finish.Stop, RateLimits: rl,
		Usage: llmclient.Usage{InputTokens: p.exact, CachedInputTokens: p.cached, OutputTokens: out, TotalTokens: p.exact + out}}, nil
}

func (u *vendorUpstream) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, llmclient.ErrUnsupported
}

// couldAdmit is what the binding quantity could admit from the start to the horizon.
func (u *vendorUpstream) couldAdmit(d time.Duration) float64 {
	b, perMin := u.in, u.v.itpm
	if u.v.bindsOutput {
		b, perMin = u.out, u.v.otpm
	}
	return b.Capacity + float64(perMin)*d.Minutes()
}

// vendorPrompts turns the prompts into the vendor's: alternately for two versions of one
// model class, a third of them with 70% of their tokens read from the cache (Anthropic).
func vendorPrompts(v Vendor, prompts []*simPrompt) []*vendorPrompt {
	out := make([]*vendorPrompt, len(prompts))
	for i, p := range prompts {
		r := *p.req
		r.Model = "gemini-2.5-flash"
		vp := &vendorPrompt{simPrompt: p, req: &r}
		if v.anthropic {
			r.Model = []string{"claude-opus-4-5", "claude-opus-4-6"}[i%2]
			if i%3 == 0 {
				vp.cached = p.exact * 7 / 10
			}
		}
		out[i] = vp
	}
	return out
}

// size is what p costs the binding quantity, on average.
func (v Vendor) size(p *vendorPrompt) float64 {
	if v.bindsOutput {
		return float64(p.req.MaxTokens) * 5 / 8
	}
	return float64(p.exact - p.cached)
}

// runVendor runs one vendor simulation in its own bubble.
func runVendor(t *testing.T, v Vendor, prompts []*vendorPrompt, replicas int,
	stores func() func(int) limitstore.Store, duration time.Duration, seed uint64) simResult {
	var res simResult
	synctest.Test(t, func(t *testing.T) {
		up := newVendorUpstream(v, prompts, seed)
		start := time.Now()
		up.horizon = start.Add(duration)
		scope := llmclient.QuotaScope{Name: "project", Limits: llmclient.Limits{RPM: v.rpm, TPM: v.itpm, Metering: ratelimit.MeterUsage}}
		keys := []string{"k1", "k2", "k3"}
		if v.anthropic {
			scope = llmclient.QuotaScope{Name: "opus-4", Models: []string{"claude-opus-4*"},
				Limits: llmclient.Limits{RPM: v.rpm, ITPM: v.itpm, OTPM: v.otpm, Metering: ratelimit.MeterUsage}}
			keys = nil
		}
		clients, closeStores := replicaClients(t, replicas, stores(), llmclient.WithUpstream(llmclient.Upstream{Name: "sim", Provider: up, Keys: keys,
			QuotaScopes: []string{scope.Name}}), llmclient.WithQuotaScope(scope), llmclient.WithBurstFraction(0.05))
		defer closeStores()
		var mean float64
		for _, p := range prompts {
			mean += v.size(p) / float64(len(prompts))
		}
		perMin := float64(v.itpm)
		if v.bindsOutput {
			perMin = float64(v.otpm)
		}
		perSecond := 2 * perMin / 60 / mean // arrivals at twice the binding quota
		var mu sync.Mutex
		var outcomes []simOutcome
		arrive(rand.New(rand.NewPCG(seed, 1)), perSecond, start, duration, func(rng *rand.Rand, n int) func() {
			p := prompts[rng.IntN(len(prompts))]
			c := clients[n%replicas]
			return func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				began := time.Now()
				_, err := c.Complete(ctx, p.req)
				o := simOutcome{size: v.size(p), ok: err == nil, elapsed: time.Since(began)}
				o.class, o.refusal = outcomeOf(err)
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
			}
		})
		up.mu.Lock()
		defer up.mu.Unlock()
		res = simResult{requests: len(outcomes), calls: up.calls, rejected: up.reject, quotaUse: up.used / up.couldAdmit(duration)}
		slices.SortFunc(outcomes, func(a, b simOutcome) int { return int(a.size - b.size) })
		var served, big, bigServed float64
		for i, o := range outcomes {
			if o.ok {
				served++
			}
			if i >= len(outcomes)*3/4 {
				big++
				if o.ok {
					bigServed++
				}
			}
			if o.refusal {
				res.refusals++
				res.maxRefusal = max(res.maxRefusal, o.elapsed)
				if o.elapsed > 0 {
					res.slowRefusals++
				}
			}
		}
		res.served, res.bigServed = served/float64(max(len(outcomes), 1)), bigServed/max(big, 1)
	})
	return res
}

// vendorSeeds is how many seeds a vendor simulation runs with when LLMCLIENT_SIM_SEEDS
// does not say.
const vendorSeeds = 8

// RunVendor runs the vendor simulation v for d with every seed (vendorSeeds by default), and checks the sum: at
// least quota of the binding quantity used, at most rejected of the calls answered 429
// (the acceptance thresholds are 0.95 and 0.005), and refusals after a wait within
// IssueThresholds' share unless a call was answered 429 (a call may then wait out its
// key's cooldown before it is refused).
func RunVendor(t *testing.T, corpus string, v Vendor, d Deployment, quota, rejected float64) {
	duration, seeds := simSettings(t)
	if os.Getenv("LLMCLIENT_SIM_SEEDS") == "" {
		// A few 429s decide the rejected share of one seed's few hundred calls: eight
		// seeds by default, so that the sum measures the limiter rather than the lumps.
		for i := len(seeds); i < vendorSeeds; i++ {
			seeds = append(seeds, seeds[0]+uint64(i))
		}
	}
	var sum simResult
	for _, seed := range seeds {
		prompts := vendorPrompts(v, quotaPrompts(t, corpus, 120, rand.New(rand.NewPCG(seed, 2))))
		r := runVendor(t, v, prompts, d.Replicas, d.Store, duration, seed)
		t.Logf("seed %d: %v", seed, r)
		sum.add(r, len(seeds))
	}
	t.Logf("all seeds: %v", sum)
	if float64(sum.rejected) > rejected*float64(max(sum.calls, 1)) {
		t.Errorf("%d upstream 429s for %d calls: more than %.1f%%", sum.rejected, sum.calls, 100*rejected)
	}
	if sum.quotaUse < quota {
		t.Errorf("used %.1f%% of the binding quantity, want ≥ %.0f%%", 100*sum.quotaUse, 100*quota)
	}
	if float64(sum.slowRefusals) > IssueThresholds.slow*float64(sum.requests) && sum.rejected == 0 {
		t.Errorf("%d refusals came after a wait (the slowest %v), want at most %.1f%% of the requests", sum.slowRefusals, sum.maxRefusal, 100*IssueThresholds.slow)
	}
}
