package llmclient_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/provider/openai"
	"github.com/llmclient/llmclient/routing"
)

// The money invariant: random scenarios — one or two replicas sharing a limit store and
// one budget (a calendar day, or a rolling minute), upstreams priced apart (their own
// rates, a self-hosted $0, one the budget cannot price, some answering under a dated
// model name), answers, failures, hangs and calls longer than the window, hedges, an
// exact cache with or without de-duplication, a semantic cache, one-shot, stream and transport (OpenAI
// chat completion) calls, some concurrent
// — each run in virtual time and checked (see moneyScenario.check):
//
//   - every call an upstream received is one attempt of the trace, priced by the one price
//     rule (the upstream's own price, whatever name it answered with), and an answer's
//     cost is its reported usage at that price, exactly;
//   - the budget's ledger holds, for its current window, the sum of what the attempts
//     settled in it counted — each once — and nothing stays reserved;
//   - within every window the spend settled stays at most the cap plus the documented
//     bound: what attempts cost beyond their reservations, and what attempts in flight
//     for longer than the window cost (see package budget);
//   - a call's cost is the sum of its attempts', and an answer served by the cache costs a
//     known $0.
//
// A failure prints the seed; LLMCLIENT_SEED=<seed> go test -run 'TestMoneyInvariants$' -v .
// replays it. LLMCLIENT_SCENARIOS=<n> runs more (default 2,000) and
// LLMCLIENT_SEED_BASE=<b> starts elsewhere (default 1).

func TestMoneyInvariants(t *testing.T) {
	t.Cleanup(func() {
		t.Logf("%d attempts answered (%d settled a window after they began), %d refused by the budget, %d unpriced, %d hedges, %d cache hits",
			moneyStats.answered.Load(), moneyStats.long.Load(), moneyStats.refused.Load(), moneyStats.unpriced.Load(),
			moneyStats.hedges.Load(), moneyStats.cached.Load())
	})
	sweep(t, "TestMoneyInvariants", 2_000, func(seed uint64) scenarioRun { return newMoneyScenario(seed) })
}

// moneyStats counts what the scenarios exercised, for the test's log.
var moneyStats struct {
	answered, long, refused, unpriced, hedges, cached atomic.Int64
}

// moneyOutcome is what an upstream does with one call.
type moneyOutcome uint8

const (
	mOK   moneyOutcome = iota
	mSlow              // an answer after 70 s: longer than a rolling minute
	m5xx
	m429
	mHang // no answer within the attempt's time
	mCut  // streams: a cut after the first chunk (one-shot: a 500)
	numMoneyOutcomes
)

var moneyOutcomeNames = [numMoneyOutcomes]string{"ok", "slow", "5xx", "429", "hang", "cut"}

// moneyUp is one upstream of a scenario.
type moneyUp struct {
	name    string
	price   *pricing.Model // nil: unpriced (its model maps to a name no table knows)
	renamed bool           // answers gpt-4o as gpt-4o-2024-08-06
	byName  bool           // its own price is keyed by the model sent, not the default ""
	in, out int            // the usage its answers report
	latency time.Duration  // of its answers
	weights [numMoneyOutcomes]int
}

// Modes of a money scenario's calls.
const (
	moneyComplete = iota
	moneyStream
	moneyTransport
)

type moneyScenario struct {
	seed       uint64
	mode       int
	replicas   int
	ups        []moneyUp
	calls      int // per replica
	concurrent bool
	spacing    time.Duration // between a replica's sequential calls
	rolling    bool
	cap        pricing.Money
	unpriced   budget.Unpriced
	charge     pricing.Money // UnpricedCost with UnpricedCharge
	hedge      time.Duration // > 0: hedging
	cache      bool
	dedup      bool
	semantic   bool // a semantic cache (one shared by the replicas)
	prompts    int
	maxTokens  int
	attempt    time.Duration // WithAttemptTimeout
}

func newMoneyScenario(seed uint64) *moneyScenario {
	rng := rand.New(rand.NewPCG(seed, 0x5ec))
	sc := &moneyScenario{seed: seed, mode: rng.IntN(3), replicas: 1 + rng.IntN(2), calls: 1 + rng.IntN(6),
		concurrent: rng.IntN(3) == 0, spacing: time.Duration(rng.IntN(25)) * time.Second, rolling: rng.IntN(2) == 0,
		prompts: 1 + rng.IntN(3), maxTokens: 100 + rng.IntN(900), attempt: time.Duration(20+rng.IntN(130)) * time.Second}
	unpricedUp := rng.IntN(4) == 0
	for i := range 1 + rng.IntN(3) {
		u := moneyUp{name: "u" + strconv.Itoa(i), renamed: rng.IntN(2) == 0, in: 1 + rng.IntN(40), out: 1 + rng.IntN(sc.maxTokens+200),
			latency: time.Duration(rng.IntN(4)) * time.Second, byName: rng.IntN(2) == 0}
		if sc.mode == moneyTransport {
			// The reservation of a transport call is estimated from its body: a one-token
			// prompt keeps the answer within it, and the check's bound exact enough.
			u.in = 1
		}
		switch {
		case unpricedUp && i == 0:
			u.renamed = false
		case rng.IntN(6) == 0:
			u.price = moneyPrice(0, 0) // self-hosted
		default:
			u.price = moneyPrice(pricing.Money(1+rng.IntN(10))*pricing.Dollar, pricing.Money(2+rng.IntN(30))*pricing.Dollar)
		}
		u.weights = [numMoneyOutcomes]int{6, rng.IntN(3), rng.IntN(3), rng.IntN(2), rng.IntN(2), rng.IntN(2)}
		sc.ups = append(sc.ups, u)
	}
	typical := pricing.Money(sc.maxTokens+20) * 20 * pricing.Dollar / 1_000_000
	sc.cap = max(typical*pricing.Money(1+rng.IntN(8))/2, 1)
	sc.unpriced = []budget.Unpriced{budget.UnpricedRefuse, budget.UnpricedCharge}[rng.IntN(2)]
	if sc.unpriced == budget.UnpricedCharge {
		sc.charge = max(typical/pricing.Money(1+rng.IntN(4)), 1)
	}
	if rng.IntN(3) == 0 {
		sc.hedge = time.Duration(1+rng.IntN(20)) * 500 * time.Millisecond
	}
	sc.cache = rng.IntN(2) == 0 && sc.mode != moneyTransport
	sc.dedup = sc.cache && rng.IntN(2) == 0
	sc.semantic = sc.mode != moneyTransport && rng.IntN(3) == 0
	return sc
}

// moneyPrice is an own price per million tokens.
func moneyPrice(in, out pricing.Money) *pricing.Model {
	m, err := pricing.NewModel(pricing.Spec{ID: "own", Price: pricing.Price{Input: pricing.PerMTok(in), Output: pricing.PerMTok(out)}})
	if err != nil {
		panic(err)
	}
	return m
}

func (sc *moneyScenario) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "money scenario %d: mode %d, %d replicas × %d calls (concurrent %v, spacing %v), rolling %v, cap %v, unpriced %v/%v\n",
		sc.seed, sc.mode, sc.replicas, sc.calls, sc.concurrent, sc.spacing, sc.rolling, sc.cap, sc.unpriced, sc.charge)
	fmt.Fprintf(&b, "  hedge %v, cache %v, dedup %v, semantic %v, prompts %d, maxTokens %d, attempt timeout %v\n",
		sc.hedge, sc.cache, sc.dedup, sc.semantic, sc.prompts, sc.maxTokens, sc.attempt)
	for _, u := range sc.ups {
		fmt.Fprintf(&b, "  %s: price %v (by name %v), renamed %v, usage %d/%d, latency %v, weights %v\n", u.name, u.price, u.byName, u.renamed, u.in, u.out, u.latency, u.weights)
	}
	return b.String()
}

func (sc *moneyScenario) window() budget.Window {
	if sc.rolling {
		return budget.Rolling(time.Minute)
	}
	return budget.Daily(time.UTC)
}

// moneyEvent is an observer event and the replica that emitted it.
type moneyEvent struct {
	replica int
	call    string // the label of the call whose context it came with
	llmclient.Event
}

// moneyWorld is a scenario's running state.
type moneyWorld struct {
	sc      *moneyScenario
	mu      sync.Mutex
	entries map[string]int // "call|upstream": calls handed to the adapter
	counts  map[string]int // "call|upstream": outcomes picked
	events  []moneyEvent
	cached  []llmclient.Response // answers a cache served
}

func (w *moneyWorld) observe(replica int) func(context.Context, llmclient.Event) {
	return func(ctx context.Context, e llmclient.Event) {
		if e.Kind != event.Attempt && e.Kind != event.Call {
			return
		}
		call, _ := ctx.Value(callKey{}).(string)
		w.mu.Lock()
		w.events = append(w.events, moneyEvent{replica, call, e})
		w.mu.Unlock()
	}
}

// pick chooses the outcome of the n-th call of call at upstream i from the seed alone.
func (w *moneyWorld) pick(i int, call string) moneyOutcome {
	w.mu.Lock()
	k := call + "|" + w.sc.ups[i].name
	n := w.counts[k]
	w.counts[k]++
	w.mu.Unlock()
	h := w.sc.seed*1_000_003 + uint64(i)*7919 + uint64(n)*104_729
	for _, c := range call {
		h = h*31 + uint64(c)
	}
	rng := rand.New(rand.NewPCG(h, 0xdef))
	u := &w.sc.ups[i]
	total := 0
	for _, wt := range u.weights {
		total += wt
	}
	x := rng.IntN(total)
	for j, wt := range u.weights {
		if x < wt {
			return moneyOutcome(j)
		}
		x -= wt
	}
	return mOK
}

func (w *moneyWorld) step(i int) fake.Step {
	u := &w.sc.ups[i]
	return fake.Func(func(call *llmclient.Call) fake.Step {
		o := w.pick(i, call.Request.Metadata["call"])
		if w.sc.mode != moneyStream && o == mCut {
			o = m5xx
		}
		latency := u.latency
		switch o {
		case mSlow:
			latency = 70 * time.Second
		case mHang:
			latency = time.Hour
		}
		switch o {
		case m5xx:
			return fake.Fail(500)
		case m429:
			return fake.Fail(429).Code("rate_limit_exceeded").RetryAfter(2 * time.Second)
		case mCut:
			return fake.Stream("a", "b").CutAfter(1)
		}
		if w.sc.mode == moneyStream {
			return fake.Stream("a", "b").StallFirst(latency).Usage(u.in, u.out)
		}
		return fake.Reply("ok").Latency(latency).Usage(u.in, u.out)
	}).Forever()
}

// moneyEntry logs every call handed to an upstream's adapter.
type moneyEntry struct {
	llmclient.Provider
	w    *moneyWorld
	name string
}

func (p moneyEntry) enter(call *llmclient.Call) { p.w.enter(call.Request.Metadata["call"], p.name) }

func (w *moneyWorld) enter(call, upstream string) {
	w.mu.Lock()
	w.entries[call+"|"+upstream]++
	w.mu.Unlock()
}

// handler is upstream i's HTTP server, for transport calls: an OpenAI chat completion.
func (w *moneyWorld) handler(i int) http.HandlerFunc {
	u := &w.sc.ups[i]
	return func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		id := r.Header.Get("X-Call")
		w.enter(id, u.name)
		o := w.pick(i, id)
		wait := func(d time.Duration) bool { return waitOrGone(r, d) }
		reply := func(code int, body string, kv ...string) { writeJSON(rw, code, body, kv...) }
		latency := u.latency
		switch o {
		case m5xx, mCut:
			reply(500, `{"error":{"message":"boom","type":"server_error","code":null}}`)
			return
		case m429:
			reply(429, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, "Retry-After-Ms", "2000")
			return
		case mSlow:
			latency = 70 * time.Second
		case mHang:
			latency = time.Hour
		}
		if !wait(latency) {
			return
		}
		model := "gpt-4o"
		switch {
		case u.price == nil:
			model = "zz-no-price-anywhere" // the name it was sent
		case u.renamed:
			model = "gpt-4o-2024-08-06"
		}
		reply(200, `{"id":"c1","object":"chat.completion","model":"`+model+`","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},`+
			`"finish_reason":"stop"}],"usage":{"prompt_tokens":`+strconv.Itoa(u.in)+`,"completion_tokens":`+strconv.Itoa(u.out)+`}}`)
	}
}

func (p moneyEntry) Complete(ctx context.Context, call *llmclient.Call) (*llmclient.Response, error) {
	p.enter(call)
	return p.Provider.Complete(ctx, call)
}

func (p moneyEntry) Stream(ctx context.Context, call *llmclient.Call) (llmclient.ProviderStream, error) {
	p.enter(call)
	return p.Provider.Stream(ctx, call)
}

func (sc *moneyScenario) request(label string, i int) *llmclient.Request {
	prompt := "question " + strconv.Itoa(i%sc.prompts) + " of the day"
	return &llmclient.Request{Model: "gpt-4o", MaxTokens: sc.maxTokens, Messages: []llmclient.Message{llmclient.UserMessage(prompt)},
		Metadata: map[string]string{"call": label}}
}

func (sc *moneyScenario) run() error {
	w := &moneyWorld{sc: sc, entries: map[string]int{}, counts: map[string]int{}}
	store := limitstore.NewMemory()
	var shared *cache.Memory
	if sc.cache {
		var err error
		if shared, err = cache.NewMemory(cache.MemoryConfig{}); err != nil {
			return err
		}
	}
	var sem *cache.Semantic
	if sc.semantic {
		// Each prompt's own direction: a question is similar only to itself.
		emb := cache.EmbedderFunc(func(_ context.Context, texts []string) ([][]float32, error) {
			out := make([][]float32, len(texts))
			for i, text := range texts {
				v := make([]float32, 8)
				v[len(text)%8] = 1
				for _, c := range text {
					if c >= '0' && c <= '9' {
						v[int(c-'0')%8] += 2
					}
				}
				out[i] = v
			}
			return out, nil
		})
		var err error
		if sem, err = cache.NewSemantic(emb); err != nil {
			return err
		}
	}
	clients := make([]*llmclient.Client, sc.replicas)
	mux := hostMux{}
	for i, u := range sc.ups {
		mux[u.name+".test"] = w.handler(i)
	}
	for r := range clients {
		opts := []llmclient.Option{llmclient.WithObserver(w.observe(r)), llmclient.WithLimitStore(store),
			llmclient.WithBudget(budget.Budget{Name: "money", Window: sc.window(), Cap: sc.cap, Unpriced: sc.unpriced, UnpricedCost: sc.charge}),
			llmclient.WithAttemptTimeout(sc.attempt), llmclient.WithFirstTokenTimeout(100 * time.Second)}
		if sc.hedge > 0 {
			opts = append(opts, llmclient.WithHedging("", routing.Hedge{On: true, Delay: sc.hedge}))
		}
		if sc.cache {
			c, err := cache.New(shared, cache.WithDedup(sc.dedup))
			if err != nil {
				return err
			}
			opts = append(opts, llmclient.WithMiddleware(c.Middleware()))
		}
		if sem != nil {
			opts = append(opts, llmclient.WithMiddleware(sem.Middleware()))
		}
		for i, u := range sc.ups {
			var p llmclient.Provider = fake.New(w.step(i))
			if u.renamed {
				p = answeredAs{p, "gpt-4o-2024-08-06"}
			}
			p = moneyEntry{p, w, u.name}
			if sc.mode == moneyTransport {
				op, err := openai.New(openai.WithBaseURL("http://" + u.name + ".test/v1"))
				if err != nil {
					return err
				}
				p = op
			}
			up := llmclient.Upstream{Name: u.name, Provider: p}
			if u.price != nil {
				key := ""
				if u.byName {
					key = "gpt-4o"
				}
				up.Prices = map[string]*pricing.Model{key: u.price}
			} else {
				up.Models = map[string]string{"gpt-4o": "zz-no-price-anywhere"}
			}
			opts = append(opts, llmclient.WithUpstream(up))
		}
		c, err := llmclient.New(opts...)
		if err != nil {
			return fmt.Errorf("New: %v", err)
		}
		clients[r] = c
	}
	var wg sync.WaitGroup
	for r, c := range clients {
		rt := c.Transport(memTransport{mux})
		wg.Go(func() {
			var inner sync.WaitGroup
			for i := range sc.calls {
				label := "r" + strconv.Itoa(r) + "c" + strconv.Itoa(i)
				if sc.concurrent {
					inner.Go(func() { sc.call(w, c, rt, label, i) })
				} else {
					sc.call(w, c, rt, label, i)
					time.Sleep(sc.spacing)
				}
			}
			inner.Wait()
		})
	}
	wg.Wait()
	synctest.Wait()
	return sc.check(w, clients[0])
}

func (sc *moneyScenario) call(w *moneyWorld, c *llmclient.Client, rt http.RoundTripper, label string, i int) {
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), callKey{}, label), 5*time.Minute)
	defer cancel()
	req := sc.request(label, i)
	var resp *llmclient.Response
	switch sc.mode {
	case moneyTransport:
		body := `{"model":"gpt-4o","user":"` + label + `","max_tokens":` + strconv.Itoa(sc.maxTokens) +
			`,"messages":[{"role":"user","content":"` + req.Messages[0].Content[0].Text + `"}]}`
		hr, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+sc.ups[0].name+".test/v1/chat/completions", strings.NewReader(body))
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set("X-Call", label)
		if r, err := rt.RoundTrip(hr); err == nil {
			_, _ = io.ReadAll(r.Body)
			_ = r.Body.Close()
		}
	case moneyStream:
		s, err := c.Stream(ctx, req)
		if err != nil {
			return
		}
		for s.Next() {
		}
		_ = s.Close()
		if s.Err() == nil {
			resp = s.Response()
		}
	default:
		resp, _ = c.Complete(ctx, req)
	}
	if resp != nil && resp.Cached {
		w.mu.Lock()
		w.cached = append(w.cached, *resp)
		w.mu.Unlock()
	}
}

// check verifies the money invariants over one scenario.
func (sc *moneyScenario) check(w *moneyWorld, c *llmclient.Client) error {
	ups := map[string]*moneyUp{}
	for i := range sc.ups {
		ups[sc.ups[i].name] = &sc.ups[i]
	}
	win := sc.window()
	type settled struct {
		slice, from   int64 // the slice it settled in, the slice it began in
		counted, over pricing.Money
	}
	var all []settled
	made := map[string]int{}
	perCall := map[string]pricing.Cost{} // "replica|callID": the sum of its attempts' costs
	for _, e := range w.events {
		if e.Kind != event.Attempt {
			continue
		}
		u := ups[e.Upstream]
		if u == nil {
			return fmt.Errorf("an attempt on unknown upstream %q", e.Upstream)
		}
		k := e.Replica() + "|" + strconv.FormatUint(e.CallID, 10)
		sum, ok := perCall[k]
		if !ok {
			sum = pricing.Cost{Known: true}
		}
		perCall[k] = sum.Plus(e.Cost)
		if e.Local {
			switch e.Class {
			case failure.BudgetExceeded:
				moneyStats.refused.Add(1)
			case failure.Unpriced:
				moneyStats.unpriced.Add(1)
			}
			if !e.Cost.Known || e.Cost.Amount != 0 {
				return fmt.Errorf("attempt %d on %s made no call but cost %+v", e.Attempt, e.Upstream, e.Cost)
			}
			continue
		}
		made[e.call+"|"+e.Upstream]++
		if e.Hedge {
			moneyStats.hedges.Add(1)
		}
		if e.Class == failure.None {
			moneyStats.answered.Add(1)
			if e.Time.Sub(e.Start) > time.Minute {
				moneyStats.long.Add(1)
			}
		}
		in := llmclient.EstimatePromptTokens(nil, sc.request("", promptOf(e.call)))
		if sc.mode == moneyTransport {
			in = 1 // at most the estimate of the body, which counts more than its prompt
		}
		var counted, reserved pricing.Money
		if u.price != nil {
			if !e.Cost.Known || e.Cost.Model != u.price {
				return fmt.Errorf("attempt %d on %s (%v) priced %+v by %v, not by the upstream's own price", e.Attempt, e.Upstream, e.Class, e.Cost, e.Cost.Model)
			}
			if e.Class == failure.None {
				want, _ := u.price.Cost(pricing.Tokens{Input: u.in, Output: u.out}, e.Time)
				if e.Cost.Amount != want || e.Cost.Estimated {
					return fmt.Errorf("an answer of %s cost %+v, want %v for its reported usage", e.Upstream, e.Cost, want)
				}
			}
			counted = e.Cost.Amount
			reserved, _ = u.price.Cost(pricing.Tokens{Input: in, Output: sc.maxTokens}, e.Time)
		} else {
			switch {
			case sc.unpriced != budget.UnpricedCharge:
				return fmt.Errorf("a call of an unpriced model reached %s: cost %+v under policy %v", e.Upstream, e.Cost, sc.unpriced)
			case e.Status >= 400 && e.InputTokens == 0 && e.OutputTokens == 0:
				// An error response: vendors do not bill it, priced or not.
				if !e.Cost.Known || e.Cost.Amount != 0 {
					return fmt.Errorf("an error response of %s (status %d) cost %+v, want a known $0", e.Upstream, e.Status, e.Cost)
				}
				counted, reserved = 0, sc.charge
			case e.Cost.Known:
				return fmt.Errorf("a call of an unpriced model reached %s: cost %+v under policy %v", e.Upstream, e.Cost, sc.unpriced)
			default:
				counted, reserved = sc.charge, sc.charge
			}
		}
		p, s := win.PeriodAt(e.Time), win.PeriodAt(e.Start)
		all = append(all, settled{slice: p.Slice, from: s.Slice, counted: counted, over: max(counted-reserved, 0)})
	}
	// Every call an upstream received is one attempt of a trace, and the other way round.
	if !mapsEqual(made, w.entries) {
		return fmt.Errorf("attempts that called an upstream %v, calls the upstreams received %v", made, w.entries)
	}
	// A call's cost is its attempts'.
	for _, e := range w.events {
		if e.Kind != event.Call {
			continue
		}
		sum, ok := perCall[e.Replica()+"|"+strconv.FormatUint(e.CallID, 10)]
		if !ok {
			sum = pricing.Cost{Known: true}
		}
		if sum.Known != e.Cost.Known || sum.Amount != e.Cost.Amount {
			return fmt.Errorf("call %s (%v) cost %+v, its attempts %+v", e.call, e.Class, e.Cost, sum)
		}
	}
	moneyStats.cached.Add(int64(len(w.cached)))
	for _, r := range w.cached {
		if !r.Cost.Known || r.Cost.Amount != 0 || len(r.Attempts) != 0 {
			return fmt.Errorf("an answer from the cache cost %+v with %d attempts", r.Cost, len(r.Attempts))
		}
	}
	// The ledger holds what the attempts settled in its current window counted, once.
	now := time.Now()
	st, err := c.Budget(context.Background(), "money", "")
	if err != nil {
		return err
	}
	cur := win.PeriodAt(now)
	var inWindow pricing.Money
	for _, s := range all {
		if s.slice >= cur.Oldest && s.slice <= cur.Slice {
			inWindow += s.counted
		}
	}
	if st.Spent != inWindow || st.Reserved != 0 {
		return fmt.Errorf("the ledger holds %v spent and %v reserved; the attempts settled in its window counted %v", st.Spent, st.Reserved, inWindow)
	}
	// Within every window, spend stays within the cap and the documented bound.
	slices.SortFunc(all, func(a, b settled) int { return int(a.slice - b.slice) })
	for _, end := range all {
		oldest := end.slice - (budget.Slices - 1)
		if !sc.rolling {
			oldest = end.slice
		}
		var spent, bound pricing.Money
		for _, s := range all {
			if s.slice < oldest || s.slice > end.slice {
				continue
			}
			spent += s.counted
			bound += s.over
			// In flight for longer than the window less a slice (or across a calendar
			// window's end): its reservation left the window before it settled.
			if (sc.rolling && s.slice-s.from >= budget.Slices-1) || (!sc.rolling && s.from < s.slice) {
				bound += s.counted
			}
		}
		if spent > sc.cap+bound {
			return fmt.Errorf("the window ending in slice %d spent %v: cap %v + bound %v", end.slice, spent, sc.cap, bound)
		}
	}
	return nil
}

// promptOf is the prompt index of a call labelled "r<replica>c<i>".
func promptOf(label string) int {
	_, i, _ := strings.Cut(label, "c")
	n, _ := strconv.Atoi(i)
	return n
}

// Replica names the replica that emitted the event.
func (e moneyEvent) Replica() string { return strconv.Itoa(e.replica) }

func mapsEqual(a, b map[string]int) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}
