package llmclient_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/provider/openai"
	"github.com/llmclient/llmclient/ratelimit"
	"github.com/llmclient/llmclient/routing"
)

// The invariant checker: random scenarios — 1–4 upstreams × 1–3 keys, scripted failures
// of every kind, random Decision overrides, limits, timeouts and deadlines, one-shot,
// stream and transport calls, some concurrent — each run in virtual time and checked
// against the engine's promises (see check). A failure prints the seed;
//
//	LLMCLIENT_SEED=<seed> go test -run TestInvariants -v .
//
// replays it, and LLMCLIENT_SCENARIOS=<n> runs more (default 10,000).

func TestInvariants(t *testing.T) {
	sweep(t, "TestInvariants", 10_000, func(seed uint64) scenarioRun { return newScenario(seed) })
}

// scenarioRun is one random scenario of an invariant sweep: it runs in virtual time and
// says how it failed; printed, it describes itself for a replay.
type scenarioRun interface {
	run() error
	String() string
}

// sweep runs the scenarios of one invariant test: LLMCLIENT_SEED=<seed> replays one,
// LLMCLIENT_SCENARIOS=<n> runs n (default def) from LLMCLIENT_SEED_BASE (default 1), spread
// over GOMAXPROCS parallel workers. A failure names the seed and the command that replays
// it.
func sweep(t *testing.T, name string, def int, scenario func(seed uint64) scenarioRun) {
	if s := os.Getenv("LLMCLIENT_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		sc := scenario(seed)
		t.Log(sc)
		synctest.Test(t, func(t *testing.T) {
			if err := sc.run(); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		})
		return
	}
	n := def
	if s := os.Getenv("LLMCLIENT_SCENARIOS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	base := uint64(1)
	if s := os.Getenv("LLMCLIENT_SEED_BASE"); s != "" {
		base, _ = strconv.ParseUint(s, 10, 64)
	}
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		t.Run("worker"+strconv.Itoa(w), func(t *testing.T) {
			t.Parallel()
			for i := w; i < n; i += workers {
				seed := base + uint64(i)
				var err error
				synctest.Test(t, func(t *testing.T) { err = scenario(seed).run() })
				if err != nil {
					t.Fatalf("scenario %d failed: %v\nreplay: LLMCLIENT_SEED=%d go test -run '%s$' -v .\n%s",
						seed, err, seed, name, scenario(seed))
				}
			}
		})
	}
}

// outcome is what an upstream does with one call.
type outcome uint8

const (
	oOK          outcome = iota
	o429RA               // 429 with a Retry-After of 0.1–5 s
	o429                 // 429 without Retry-After
	o429Absurd           // 429 with a Retry-After of 1e18 ns
	oQuota               // 429 insufficient_quota
	o401                 // a revoked key
	o5xx                 // 500 or 502
	o529                 // overloaded
	oHang                // no answer before the context ends (an hour)
	oStall               // stream headers, then nothing (one-shot: a hang)
	oCut                 // one content chunk, then a cut
	oInBandEarly         // an error event before the first token
	oInBandLate          // an error event after the first token
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"ok", "429+RA", "429", "429+absurd-RA", "quota", "401", "5xx", "529",
	"hang", "stall", "cut", "inband-early", "inband-late"}

func (o outcome) String() string { return outcomeNames[o] }

// Modes of a scenario's calls.
const (
	modeComplete = iota
	modeStream
	modeTransport
)

type upSpec struct {
	name    string
	keys    int
	weights [numOutcomes]int // the upstream's profile
	limits  llmclient.Limits
	latency time.Duration // of successful answers
}

// scenario is one random configuration and the calls made against it.
type scenario struct {
	seed       uint64
	mode       int
	ups        []upSpec
	calls      int
	concurrent bool
	deadline   time.Duration // 0: none
	closeEarly bool          // streams: close after the first chunk

	maxAttempts, maxTotal int
	budgetRatio           float64
	budgetFloor           int
	budgetTTL             time.Duration
	threshold             time.Duration // -1: default
	failFast              bool
	maxWait               time.Duration
	firstToken, idle      time.Duration // 0: default
	attemptTimeout        time.Duration
	breaker               *breaker.Config
	overrides             map[failure.Class]llmclient.Decision
	partitions            bool
	routing               routing.Policy // routing.Default: the Client's default, ordered
	hedge                 time.Duration  // > 0: hedging on with this delay
}

func newScenario(seed uint64) *scenario {
	rng := rand.New(rand.NewPCG(seed, 0x11c))
	sc := &scenario{seed: seed, mode: rng.IntN(3), calls: 1 + rng.IntN(5), concurrent: rng.IntN(10) < 3,
		maxAttempts: 3, maxTotal: 6, budgetRatio: 0.3, budgetFloor: 10, budgetTTL: 10 * time.Second, threshold: -1}
	for i := range 1 + rng.IntN(4) {
		u := upSpec{name: "u" + strconv.Itoa(i), keys: 1 + rng.IntN(3), latency: time.Duration(rng.IntN(3)) * 500 * time.Millisecond}
		profile := rng.IntN(4)
		for o := range numOutcomes {
			switch {
			case o == oOK:
				u.weights[o] = []int{20, 6, 1, 8}[profile]
			case profile == 2: // dead: failures of one or two kinds
				if rng.IntN(4) == 0 {
					u.weights[o] = 3
				}
			default:
				u.weights[o] = rng.IntN(3)
			}
		}
		if rng.IntN(10) < 3 {
			u.limits = llmclient.Limits{RPM: 6 + rng.IntN(120), MaxConcurrent: rng.IntN(3)}
			u.limits.RequestBurst = min(1+rng.IntN(3), u.limits.RPM)
		}
		sc.ups = append(sc.ups, u)
	}
	if rng.IntN(2) == 0 {
		sc.deadline = time.Duration(2+rng.IntN(59)) * time.Second
	}
	sc.closeEarly = rng.IntN(5) == 0
	if rng.IntN(3) == 0 {
		sc.maxAttempts, sc.maxTotal = 1+rng.IntN(4), 1+rng.IntN(8)
	}
	if rng.IntN(3) == 0 {
		sc.budgetRatio, sc.budgetFloor, sc.budgetTTL = rng.Float64(), rng.IntN(6), time.Duration(1+rng.IntN(20))*time.Second
	}
	if rng.IntN(3) == 0 {
		sc.threshold = time.Duration(rng.IntN(6)) * time.Second
	}
	sc.failFast = rng.IntN(5) == 0
	if rng.IntN(5) == 0 {
		sc.maxWait = time.Duration(rng.IntN(5)) * time.Second
	}
	if rng.IntN(2) == 0 {
		sc.firstToken = time.Duration(1+rng.IntN(30)) * time.Second
	}
	if rng.IntN(3) == 0 {
		sc.idle = time.Duration(1+rng.IntN(10)) * time.Second
	}
	if rng.IntN(3) == 0 {
		sc.attemptTimeout = time.Duration(1+rng.IntN(20)) * time.Second
	}
	if rng.IntN(3) == 0 {
		sc.breaker = &breaker.Config{ConsecutiveFailures: 2 + rng.IntN(4), OpenTimeout: time.Duration(1+rng.IntN(10)) * time.Second,
			HalfOpenProbes: 1 + rng.IntN(2)}
	}
	if rng.IntN(10) < 3 {
		sc.overrides = map[failure.Class]llmclient.Decision{}
		classes := []failure.Class{failure.RateLimited, failure.QuotaExhausted, failure.ServerError,
			failure.Overloaded, failure.Timeout, failure.Network, failure.Auth,
			failure.Unavailable, failure.StreamInterrupted}
		for range 1 + rng.IntN(3) {
			c := classes[rng.IntN(len(classes))]
			b := func() bool { return rng.IntN(2) == 0 }
			sc.overrides[c] = llmclient.Decision{Retry: b(), NextKey: b(), Failover: b(), Breaker: b(), Cooldown: b(), Evict: b()}
		}
	}
	sc.partitions = rng.IntN(5) == 0
	// Drawn last, so that the scenarios above replay as they did before these existed.
	if rng.IntN(5) == 0 {
		sc.routing = routing.Policy(2 + rng.IntN(3)) // weighted, least-in-flight, latency
	}
	if rng.IntN(4) == 0 {
		sc.hedge = time.Duration(1+rng.IntN(30)) * 100 * time.Millisecond
	}
	return sc
}

func (sc *scenario) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario %d: mode %d, %d calls (concurrent %v), deadline %v, closeEarly %v, partitions %v, routing %d, hedge %v\n",
		sc.seed, sc.mode, sc.calls, sc.concurrent, sc.deadline, sc.closeEarly, sc.partitions, sc.routing, sc.hedge)
	fmt.Fprintf(&b, "  attempts %d/%d, budget %.2f+%d/%v, threshold %v, failFast %v, maxWait %v, firstToken %v, idle %v, attempt %v\n",
		sc.maxAttempts, sc.maxTotal, sc.budgetRatio, sc.budgetFloor, sc.budgetTTL, sc.threshold, sc.failFast, sc.maxWait,
		sc.firstToken, sc.idle, sc.attemptTimeout)
	if sc.breaker != nil {
		fmt.Fprintf(&b, "  breaker %+v\n", *sc.breaker)
	}
	for c, d := range sc.overrides {
		fmt.Fprintf(&b, "  decision %v: %+v\n", c, d)
	}
	for _, u := range sc.ups {
		fmt.Fprintf(&b, "  %s: %d keys, weights %v, limits %+v, latency %v\n", u.name, u.keys, u.weights, u.limits, u.latency)
	}
	return b.String()
}

// arrival is one call an upstream received.
type arrival struct {
	call    string
	up, key string // key label
	at      time.Time
	outcome outcome
	ra      time.Duration
}

// world is a scenario's running state: the upstreams' logs and the observer's traces.
type world struct {
	sc       *scenario
	mu       sync.Mutex
	arrivals []arrival
	// entries are the calls handed to each fake adapter, in order, including those whose
	// context was already done (which the fake records without playing a step); for
	// transport scenarios, arrivals is that log.
	entries []arrival
	counts  map[string]int // per call and upstream: arrivals so far
	traces  map[string][]llmclient.Event
	ends    map[string][]llmclient.Event
}

type callKey struct{}

// pick chooses the outcome of the n-th arrival of call at upstream i, from the seed alone,
// so that a scenario replays the same way whatever the scheduling.
func (w *world) pick(i int, call string, mode int) (outcome, time.Duration) {
	w.mu.Lock()
	k := call + "@" + strconv.Itoa(i)
	n := w.counts[k]
	w.counts[k]++
	w.mu.Unlock()
	h := w.sc.seed*1_000_003 + uint64(i)*7919 + uint64(n)*104_729
	for _, c := range call {
		h = h*31 + uint64(c)
	}
	rng := rand.New(rand.NewPCG(h, 0xabc))
	u := &w.sc.ups[i]
	total := 0
	for _, wt := range u.weights {
		total += wt
	}
	o := oOK
	if total > 0 {
		x := rng.IntN(total)
		for j, wt := range u.weights {
			if x < wt {
				o = outcome(j)
				break
			}
			x -= wt
		}
	}
	if mode == modeComplete { // what a stream-only behaviour looks like to a one-shot call
		switch o {
		case oStall:
			o = oHang
		case oInBandEarly:
			o = o529
		case oInBandLate:
			o = oCut
		}
	}
	return o, time.Duration(100+rng.IntN(4900)) * time.Millisecond
}

func (w *world) log(a arrival) {
	w.mu.Lock()
	w.arrivals = append(w.arrivals, a)
	w.mu.Unlock()
}

func (w *world) observe(ctx context.Context, e llmclient.Event) {
	call, _ := ctx.Value(callKey{}).(string)
	w.mu.Lock()
	defer w.mu.Unlock()
	switch e.Kind {
	case event.Attempt:
		w.traces[call] = append(w.traces[call], e)
	case event.Call:
		w.ends[call] = append(w.ends[call], e)
	}
}

// entryLog is a fake upstream that logs every call handed to it before the fake sees it.
type entryLog struct {
	*fake.Provider
	w    *world
	name string
}

func (p entryLog) enter(call *llmclient.Call) {
	p.w.mu.Lock()
	p.w.entries = append(p.w.entries, arrival{call: call.Request.Metadata["call"], up: p.name, key: keyLabel(call.APIKey)})
	p.w.mu.Unlock()
}

func (p entryLog) Complete(ctx context.Context, call *llmclient.Call) (*llmclient.Response, error) {
	p.enter(call)
	return p.Provider.Complete(ctx, call)
}

func (p entryLog) Stream(ctx context.Context, call *llmclient.Call) (llmclient.ProviderStream, error) {
	p.enter(call)
	return p.Provider.Stream(ctx, call)
}

// fakeStep is the fake provider's script for upstream i.
func (w *world) fakeStep(i int, stream bool) fake.Step {
	mode := modeComplete
	if stream {
		mode = modeStream
	}
	return fake.Func(func(call *llmclient.Call) fake.Step {
		id := call.Request.Metadata["call"]
		o, ra := w.pick(i, id, mode)
		u := &w.sc.ups[i]
		w.log(arrival{call: id, up: u.name, key: keyLabel(call.APIKey), at: time.Now(), outcome: o, ra: ra})
		switch o {
		case oOK:
			if stream {
				return fake.Stream("a", "b", "c").StallFirst(u.latency).ChunkDelay(100*time.Millisecond).Usage(5, 3)
			}
			return fake.Reply("ok").Latency(u.latency).Usage(5, 2)
		case o429RA:
			return fake.Fail(429).Code("rate_limit_exceeded").RetryAfter(ra)
		case o429:
			return fake.Fail(429).Code("rate_limit_exceeded")
		case o429Absurd:
			return fake.Fail(429).Code("rate_limit_exceeded").RetryAfter(math.MaxInt64 / 9)
		case oQuota:
			return fake.FailClass(failure.QuotaExhausted).Status(429).Code("insufficient_quota")
		case o401:
			return fake.Fail(401)
		case o5xx:
			return fake.Fail(500)
		case o529:
			return fake.Fail(529)
		case oHang:
			return fake.Reply("late").Latency(time.Hour)
		case oStall:
			return fake.Stream("late").StallFirst(time.Hour)
		case oCut:
			return fake.Stream("a", "b").CutAfter(1)
		case oInBandEarly:
			return fake.Stream("a").FailAfter(0, fake.Fail(529))
		default: // oInBandLate
			return fake.Stream("a", "b").FailAfter(1, fake.Fail(500))
		}
	}).Forever()
}

// handler is upstream i's HTTP server, for transport calls.
func (w *world) handler(i int) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		id := r.Header.Get("X-Call")
		stream := r.Header.Get("X-Stream") == "1"
		mode := modeComplete
		if stream {
			mode = modeStream
		}
		o, ra := w.pick(i, id, mode)
		u := &w.sc.ups[i]
		w.log(arrival{call: id, up: u.name, key: keyLabel(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")),
			at: time.Now(), outcome: o, ra: ra})
		wait := func(d time.Duration) bool { return waitOrGone(r, d) }
		fail := func(code int, body string, kv ...string) { writeJSON(rw, code, body, kv...) }
		sse := func() { rw.Header().Set("Content-Type", "text/event-stream"); rw.WriteHeader(200) }
		const rl = `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`
		switch o {
		case oOK:
			if !wait(u.latency) {
				return
			}
			if stream {
				sse()
				_, _ = io.WriteString(rw, roleChunk+chunk("a"))
				_, _ = io.WriteString(rw, chunk("b")+stopChunk+done)
				return
			}
			fail(200, chatOK)
		case o429RA:
			fail(429, rl, "Retry-After-Ms", strconv.FormatInt(ra.Milliseconds(), 10))
		case o429:
			fail(429, rl)
		case o429Absurd:
			fail(429, rl, "Retry-After", "1000000000000000000")
		case oQuota:
			fail(429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`)
		case o401:
			fail(401, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`)
		case o5xx:
			fail(500, `{"error":{"message":"boom","type":"server_error","code":null}}`)
		case o529:
			fail(503, `{"error":{"message":"overloaded","type":"service_unavailable_error","code":"server_is_overloaded"}}`)
		case oHang: // an answer an hour late, unless the caller gives up first
			if wait(time.Hour) {
				fail(200, chatOK)
			}
		case oStall:
			sse()
			if wait(time.Hour) {
				_, _ = io.WriteString(rw, roleChunk+chunk("late")+stopChunk+done)
			}
		case oCut:
			sse()
			_, _ = io.WriteString(rw, roleChunk+chunk("a"))
		case oInBandEarly:
			sse()
			_, _ = io.WriteString(rw, `data: {"error":{"message":"overloaded","type":"server_error","code":null}}`+"\n\n")
		case oInBandLate:
			sse()
			_, _ = io.WriteString(rw, roleChunk+chunk("a"))
			_, _ = io.WriteString(rw, `data: {"error":{"message":"boom","type":"server_error","code":null}}`+"\n\n")
		}
	}
}

// keyLabel maps a scenario key "kN" to its trace label.
func keyLabel(secret string) string {
	if strings.HasPrefix(secret, "k") {
		return "key#" + secret[1:]
	}
	return ""
}

// result is what one call returned.
type result struct {
	call       string
	start, end time.Time
	err        error
	trace      []llmclient.Attempt
	served     string
}

// run builds the scenario's Client and upstreams, makes its calls and checks them.
func (sc *scenario) run() error {
	w := &world{sc: sc, counts: map[string]int{}, traces: map[string][]llmclient.Event{}, ends: map[string][]llmclient.Event{}}
	opts := sc.options(w)
	mux := hostMux{}
	for i, u := range sc.ups {
		keys := make([]string, u.keys)
		for k := range keys {
			keys[k] = "k" + strconv.Itoa(k+1)
		}
		var p llmclient.Provider
		if sc.mode == modeTransport {
			op, err := openai.New(openai.WithBaseURL("http://" + u.name + ".test/v1"))
			if err != nil {
				return err
			}
			p = op
			mux[u.name+".test"] = w.handler(i)
		} else {
			p = entryLog{Provider: fake.New(w.fakeStep(i, sc.mode == modeStream)), w: w, name: u.name}
		}
		opts = append(opts, llmclient.WithUpstream(llmclient.Upstream{Name: u.name, Provider: p, Keys: keys, Limits: u.limits}))
	}
	c, err := llmclient.New(opts...)
	if err != nil {
		return fmt.Errorf("New: %v", err)
	}
	var rt http.RoundTripper
	if sc.mode == modeTransport {
		rt = c.Transport(memTransport{mux})
	}
	results := make([]result, sc.calls)
	if sc.concurrent {
		var wg sync.WaitGroup
		for i := range sc.calls {
			wg.Go(func() { results[i] = sc.call(c, rt, i) })
		}
		wg.Wait()
	} else {
		for i := range sc.calls {
			results[i] = sc.call(c, rt, i)
		}
	}
	synctest.Wait() // background settles (timers, closes) finish
	return sc.check(c, w, results)
}

func (sc *scenario) options(w *world) []llmclient.Option {
	opts := []llmclient.Option{llmclient.WithObserver(w.observe),
		llmclient.WithMaxAttempts(sc.maxAttempts), llmclient.WithMaxTotalAttempts(sc.maxTotal),
		llmclient.WithRetryBudget(sc.budgetRatio, sc.budgetFloor, sc.budgetTTL)}
	if sc.threshold >= 0 {
		opts = append(opts, llmclient.WithWaitThreshold(ratelimit.Interactive, sc.threshold))
	}
	if sc.failFast {
		opts = append(opts, llmclient.WithLimiterMode(ratelimit.FailFast))
	}
	if sc.maxWait > 0 {
		opts = append(opts, llmclient.WithMaxWait(sc.maxWait))
	}
	if sc.firstToken > 0 {
		opts = append(opts, llmclient.WithFirstTokenTimeout(sc.firstToken))
	}
	if sc.idle > 0 {
		opts = append(opts, llmclient.WithIdleTimeout(sc.idle))
	}
	if sc.attemptTimeout > 0 {
		opts = append(opts, llmclient.WithAttemptTimeout(sc.attemptTimeout))
	}
	if sc.breaker != nil {
		opts = append(opts, llmclient.WithBreaker(*sc.breaker))
	}
	for c, d := range sc.overrides {
		opts = append(opts, llmclient.WithDecision(c, d))
	}
	if sc.partitions {
		opts = append(opts, llmclient.WithPartitionLimits("", llmclient.Limits{MaxConcurrent: 1}))
	}
	if sc.routing != routing.Default {
		opts = append(opts, llmclient.WithRouting("", sc.routing))
	}
	if sc.hedge > 0 {
		opts = append(opts, llmclient.WithHedging("", routing.Hedge{On: true, Delay: sc.hedge}))
	}
	return opts
}

func (sc *scenario) decision(c failure.Class) llmclient.Decision {
	if d, ok := sc.overrides[c]; ok {
		return d
	}
	return llmclient.DefaultDecision(c)
}

// call makes call number i and returns what it did.
func (sc *scenario) call(c *llmclient.Client, rt http.RoundTripper, i int) result {
	id := "c" + strconv.Itoa(i)
	ctx := context.WithValue(context.Background(), callKey{}, id)
	if sc.partitions {
		ctx = llmclient.WithPartition(ctx, "p"+strconv.Itoa(i%2))
	}
	if sc.deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, sc.deadline)
		defer cancel()
	}
	req := &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("hi")},
		Metadata: map[string]string{"call": id}}
	res := result{call: id, start: time.Now()}
	switch sc.mode {
	case modeComplete:
		resp, err := c.Complete(ctx, req)
		res.err = err
		if resp != nil {
			res.trace, res.served = resp.Attempts, resp.Upstream
		}
	case modeStream:
		s, err := c.Stream(ctx, req)
		if err != nil {
			res.err = err
			break
		}
		for s.Next() {
			if sc.closeEarly {
				break
			}
		}
		_ = s.Close()
		res.err = s.Err()
		if res.err == nil && !sc.closeEarly {
			res.trace, res.served = s.Response().Attempts, s.Response().Upstream
		}
	case modeTransport:
		stream := sc.seed%2 == 0
		// Each call's body is its own (the user field names it): independent calls, never an
		// SDK's repeat of another (see WithRepeatWindow).
		body := `{"model":"m","user":"` + id + `","messages":[{"role":"user","content":"hi"}],"stream":` + strconv.FormatBool(stream) + `}`
		hr, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+sc.ups[0].name+".test/v1/chat/completions", strings.NewReader(body))
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set("X-Call", id)
		if stream {
			hr.Header.Set("X-Stream", "1")
		}
		resp, err := rt.RoundTrip(hr)
		res.err = err
		if err == nil {
			if sc.closeEarly {
				_, _ = resp.Body.Read(make([]byte, 16))
			} else {
				_, res.err = io.ReadAll(resp.Body)
			}
			_ = resp.Body.Close()
		}
	}
	if e := asError(res.err); e != nil && res.trace == nil {
		res.trace = e.Attempts
	}
	res.end = time.Now()
	return res
}

func asError(err error) *llmclient.Error {
	var e *llmclient.Error
	if err != nil && errors.As(err, &e) {
		return e
	}
	return nil
}

// check verifies the engine's promises over one scenario's calls.
func (sc *scenario) check(c *llmclient.Client, w *world, results []result) error {
	if keys, lims, parts := llmclient.LeasesHeld(c); keys != 0 || lims != 0 || parts != 0 {
		return fmt.Errorf("leases held after every call ended: keys %d, limiter %d, partitions %d", keys, lims, parts)
	}
	for _, u := range sc.ups {
		if n := c.Breaker(u.name).Snapshot().ProbesInFlight; n != 0 {
			return fmt.Errorf("%s: %d half-open probes still out", u.name, n)
		}
	}
	route := map[string]int{}
	for i, u := range sc.ups {
		route[u.name] = i
	}
	for _, res := range results {
		if err := sc.checkCall(w, res, route); err != nil {
			var tr strings.Builder
			for _, e := range w.traces[res.call] {
				fmt.Fprintf(&tr, "\n    #%d %s %s %v local=%v hedge=%v ended %v", e.Attempt, e.Upstream, e.Key, e.Class, e.Local,
					e.Hedge, e.Time.Sub(res.start))
			}
			return fmt.Errorf("call %s: %w; attempts as they ended:%s", res.call, err, tr.String())
		}
	}
	if err := sc.checkCooldowns(w); err != nil {
		return err
	}
	return sc.checkBudget(w, results)
}

func (sc *scenario) checkCall(w *world, res result, route map[string]int) error {
	evs, ends := slices.Clone(w.traces[res.call]), w.ends[res.call]
	// A hedged call's attempts can end out of order: the trace is in attempt order.
	slices.SortStableFunc(evs, func(a, b llmclient.Event) int { return a.Attempt - b.Attempt })
	if len(ends) != 1 {
		return fmt.Errorf("%d call events, want 1", len(ends))
	}
	end := ends[0]
	if end.Attempt != len(evs) {
		return fmt.Errorf("call event counts %d attempts, %d attempt events", end.Attempt, len(evs))
	}
	// The trace the caller got, where it got one, is the observer's.
	if res.trace != nil && len(res.trace) != len(evs) {
		return fmt.Errorf("returned trace has %d attempts, the observer saw %d", len(res.trace), len(evs))
	}
	// The calls the upstreams received are the trace's calls.
	var made []string
	for _, e := range evs {
		if !e.Local {
			made = append(made, e.Upstream+"/"+e.Key)
		}
	}
	var got []string
	log := w.entries
	if sc.mode == modeTransport {
		log = w.arrivals
	}
	for _, a := range log {
		if a.call == res.call {
			got = append(got, a.up+"/"+a.key)
		}
	}
	hedge := slices.IndexFunc(evs, func(e llmclient.Event) bool { return e.Hedge })
	hedgedOn := "" // the upstream a hedge called
	if hedge >= 0 {
		// A hedge can reach its upstream before the attempt it hedges, when that one is
		// still waiting for its key or limiter: compare the calls, not their order.
		slices.Sort(made)
		slices.Sort(got)
	}
	if strings.Join(made, " ") != strings.Join(got, " ") {
		return fmt.Errorf("trace calls %v, upstreams received %v", made, got)
	}
	if hedge >= 0 {
		if sc.mode == modeTransport || sc.hedge <= 0 {
			return fmt.Errorf("attempt %d is a hedge, but the call cannot hedge", evs[hedge].Attempt)
		}
		if n := len(slices.DeleteFunc(slices.Clone(evs), func(e llmclient.Event) bool { return !e.Hedge })); n != 1 {
			return fmt.Errorf("%d hedges, at most one per call", n)
		}
		if hedge == 0 || evs[hedge-1].Attempt != evs[hedge].Attempt-1 || evs[hedge-1].Upstream == evs[hedge].Upstream {
			return fmt.Errorf("hedge %d does not follow the attempt it hedges on another upstream", evs[hedge].Attempt)
		}
		// The decision steps go on from the one of the pair the call went on with: the
		// winner, the failure that ended it, or the later of two failures — but never a
		// retry the retry budget refused: as without a hedge, such a refusal leaves the
		// call with the error before it, the hedge's, from the hedged upstream (the
		// primary's).
		a, h := evs[hedge-1], evs[hedge]
		drop, from := hedge-1, ""
		switch {
		case budgetRefusal(a) && budgetRefusal(h):
			// Both refused before their calls: the call goes on, or ends, with the error
			// before the pair, and the hedge called nobody (seed 8823009).
			evs = slices.Delete(slices.Clone(evs), hedge-1, hedge+1)
			return sc.checkSteps(res, end, route, made, evs, -1, "")
		case budgetRefusal(a) && !budgetRefusal(h):
			from = a.Upstream
		case budgetRefusal(h) && !budgetRefusal(a):
			drop = hedge
		case h.Class == failure.StreamInterrupted: // a stream breaks only after it won
		case a.Class == failure.StreamInterrupted:
			drop = hedge
		case h.Class == failure.None && a.Class != failure.None:
		case a.Class == failure.None:
			drop = hedge
		case h.Class == failure.Canceled && a.Class != failure.Canceled:
			drop = hedge
		case a.Class == failure.Canceled && h.Class != failure.Canceled:
			// Either the hedge's failure ended the call and canceled the other, or it
			// failed aside and the other went on (and ended canceled: closed early, or
			// out of time).
			if sc.decision(h.Class).Failover {
				drop = hedge
			}
		case h.Time.Before(a.Time):
			drop = hedge
		case h.Time.Equal(a.Time):
			// Two failures at the same instant: either may have been taken as the first.
			if e2, h2, on := dropPair(evs, hedge, hedge-1); sc.checkSteps(res, end, route, made, e2, h2, on) == nil {
				return nil
			}
			drop = hedge
		}
		evs, hedge, hedgedOn = dropPair(evs, hedge, drop)
		if from != "" {
			evs[hedge].Upstream = from // dropPair cloned evs
		}
	}
	return sc.checkSteps(res, end, route, made, evs, hedge, hedgedOn)
}

// budgetRefusal reports whether e is an attempt the retry budget refused before its call.
func budgetRefusal(e llmclient.Event) bool {
	return e.Local && errors.Is(e.Err, llmclient.ErrRetryBudget)
}

// dropPair removes one attempt of a hedged pair, drop, from the trace, returning where
// the hedge is then (-1 when it was the one dropped).
func dropPair(evs []llmclient.Event, hedge, drop int) ([]llmclient.Event, int, string) {
	on := evs[hedge].Upstream
	evs = slices.Delete(slices.Clone(evs), drop, drop+1)
	if drop == hedge-1 {
		return evs, hedge - 1, on
	}
	return evs, -1, on // the hedge was dropped: the step into the partner stays checked
}

// checkSteps verifies a call's trace, a hedged pair reduced to the attempt the call went
// on with, against the caps and the decision table; hedge is the hedge's index in evs and
// hedgedOn the upstream it called.
func (sc *scenario) checkSteps(res result, end llmclient.Event, route map[string]int, made []string,
	evs []llmclient.Event, hedge int, hedgedOn string) error {
	perUp := map[string]int{}
	for _, m := range made {
		perUp[strings.Split(m, "/")[0]]++
	}
	if len(made) > sc.maxTotal {
		return fmt.Errorf("%d upstream calls, cap %d", len(made), sc.maxTotal)
	}
	for up, n := range perUp {
		if n > sc.maxAttempts {
			return fmt.Errorf("%d calls on %s, cap %d", n, up, sc.maxAttempts)
		}
	}
	// Every step follows the decision table. An ordered route starts on the upstreams
	// that are not demoted (serve.go: demoteAfter cuts in a row) and puts the demoted ones
	// last, in order: so a call may go back once, to an upstream it has not called, and
	// from then on never to one it called before the wrap.
	visited := map[string]bool{}
	var before map[string]bool // the upstreams called before the wrap; nil: no wrap
	for j := 0; j+1 < len(evs); j++ {
		e, nx := evs[j], evs[j+1]
		visited[e.Upstream] = true
		d := sc.decision(e.Class)
		reordered := sc.routing > routing.Ordered
		switch {
		case j+1 == hedge:
			// The step into a hedge is the hedging policy's, not a decision's.
		case e.Local && nx.Upstream == e.Upstream:
			return fmt.Errorf("attempt %d: a local refusal (%v) retried the same upstream", j+1, e.Class)
		case e.Local && !d.Failover:
			return fmt.Errorf("attempt %d: a local refusal of %v moved on without Failover", j+1, e.Class)
		case e.Local:
		case nx.Upstream == e.Upstream && !d.Retry && !d.NextKey && !d.GrowOutput:
			return fmt.Errorf("attempt %d: %v retried %s against its decision %+v", j+1, e.Class, e.Upstream, d)
		case nx.Upstream != e.Upstream && !d.Failover:
			return fmt.Errorf("attempt %d: %v failed over (%s → %s) against its decision %+v", j+1, e.Class, e.Upstream, nx.Upstream, d)
		case !reordered && nx.Upstream != e.Upstream && before != nil && before[nx.Upstream]:
			return fmt.Errorf("attempt %d: went back from %s to %s, called before the demoted upstreams", j+1, e.Upstream, nx.Upstream)
		case !reordered && nx.Upstream != e.Upstream && route[nx.Upstream] <= route[e.Upstream]:
			if before != nil || visited[nx.Upstream] {
				return fmt.Errorf("attempt %d: went back from %s to %s", j+1, e.Upstream, nx.Upstream)
			}
			before = maps.Clone(visited) // the wrap onto the demoted upstreams
		}
	}
	elapsed := res.end.Sub(res.start)
	atDeadline := sc.deadline > 0 && elapsed == sc.deadline
	if sc.deadline > 0 && elapsed > sc.deadline {
		return fmt.Errorf("took %v, deadline %v", elapsed, sc.deadline)
	}
	if len(evs) == 0 {
		if end.Class == failure.None {
			return fmt.Errorf("succeeded without an attempt")
		}
		return nil
	}
	last := evs[len(evs)-1]
	if atDeadline && last.Time.Before(res.end) && sc.mode != modeStream {
		return fmt.Errorf("at the deadline no attempt was under way (the last ended %v before): a wait that could not end in time was started",
			res.end.Sub(last.Time))
	}
	final := end.Class
	switch {
	case final == failure.None && last.Class != failure.None && !(sc.closeEarly && last.Class == failure.Canceled):
		return fmt.Errorf("succeeded but the last attempt was %v", last.Class)
	case final != failure.None && final != last.Class && !atDeadline &&
		!(final == failure.Canceled && sc.closeEarly):
		return fmt.Errorf("final class %v, the last attempt %v (%v)", final, last.Class, last.Err)
	}
	if sc.mode != modeTransport && res.err != nil && llmclient.ClassOf(res.err) != final && !(sc.closeEarly && final == failure.Canceled) {
		return fmt.Errorf("returned class %v, call event %v", llmclient.ClassOf(res.err), final)
	}
	// A call that could still move on did so, unless it ran out of calls or time: its
	// context's deadline, or without one its time budget (WithCallBudget's default).
	d := sc.decision(last.Class)
	outOfBudget := sc.deadline == 0 && elapsed >= defaultCallBudget-time.Second
	// (A route with demoted upstreams is not in the scenario's order: the check needs
	// that order, so it applies when the call started on the route's first upstream and
	// never wrapped.)
	demoted := before != nil || route[evs[0].Upstream] > 0
	if final != failure.None && !atDeadline && !outOfBudget && last.Class != failure.StreamInterrupted && d.Failover &&
		!demoted && sc.routing <= routing.Ordered && len(made) < sc.maxTotal && route[last.Upstream] < len(sc.ups)-1 &&
		// Moving to the upstream a hedge already called is a retry there, which its retry
		// budget may refuse.
		sc.ups[route[last.Upstream]+1].name != hedgedOn {
		return fmt.Errorf("ended with %v on %s although %s was left", last.Class, last.Upstream, sc.ups[route[last.Upstream]+1].name)
	}
	return nil
}

// defaultCallBudget is WithCallBudget's documented default, which bounds the scenarios'
// calls without a deadline.
const defaultCallBudget = 10 * time.Minute

// checkCooldowns verifies that no key was called while a Retry-After cooldown or an
// eviction blocked it.
func (sc *scenario) checkCooldowns(w *world) error {
	type block struct {
		from, until time.Time
		why         string
	}
	blocks := map[string][]block{}
	const evict = time.Hour
	// An answer the client did not read (its attempt was canceled: the other of a hedged
	// pair won, or the caller gave up) blocks nothing.
	unread := map[string]bool{}
	for call, evs := range w.traces {
		for _, e := range evs {
			if e.Class == failure.Canceled {
				unread[call+"|"+e.Upstream+"/"+e.Key] = true
			}
		}
	}
	for _, a := range w.arrivals {
		k := a.up + "/" + a.key
		for _, b := range blocks[k] {
			if a.at.After(b.from) && a.at.Before(b.until) {
				return fmt.Errorf("%s called %v after a %s that blocked it for %v", k, a.at.Sub(b.from), b.why, b.until.Sub(b.from))
			}
		}
		if unread[a.call+"|"+k] {
			continue
		}
		var d time.Duration
		switch {
		case (a.outcome == o429RA || a.outcome == o429Absurd) && sc.decision(failure.RateLimited).Cooldown:
			d = a.ra
			if a.outcome == o429Absurd {
				d = evict
			}
			if sc.mode == modeTransport {
				d = d.Truncate(time.Millisecond)
			}
		case a.outcome == o401 && sc.decision(failure.Auth).Evict,
			a.outcome == oQuota && sc.decision(failure.QuotaExhausted).Evict:
			d = evict
		}
		if d > 0 {
			blocks[k] = append(blocks[k], block{a.at, a.at.Add(min(d, evict)), a.outcome.String()})
		}
	}
	return nil
}

// checkBudget verifies that the retries to each upstream stay within the retry budget's
// bound over the scenario's windows.
func (sc *scenario) checkBudget(w *world, results []result) error {
	var first, last time.Time
	for _, r := range results {
		if first.IsZero() || r.start.Before(first) {
			first = r.start
		}
		if r.end.After(last) {
			last = r.end
		}
	}
	windows := float64(last.Sub(first))/(0.9*float64(sc.budgetTTL)) + 2
	for _, u := range sc.ups {
		firsts, total := map[string]bool{}, 0
		for _, a := range w.arrivals {
			if a.up == u.name {
				firsts[a.call] = true
				total++
			}
		}
		retries := float64(total - len(firsts))
		// In each window a retry is allowed while retries < ratio × firsts + floor, so a
		// window admits up to ratio × its firsts + floor + 1 (the last one rounding up).
		bound := sc.budgetRatio*float64(len(firsts)) + float64(sc.budgetFloor+1)*windows
		if retries > math.Ceil(bound) {
			return fmt.Errorf("%s: %v retries for %d first calls, budget bound %.1f", u.name, retries, len(firsts), bound)
		}
	}
	return nil
}

// waitOrGone waits d, reporting false when the request's context ends first (the client
// gave up): the scenarios' upstreams use it to hold an answer back.
func waitOrGone(r *http.Request, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-r.Context().Done():
		return false
	}
}

// writeJSON answers with status code, a JSON body and the header pairs kv.
func writeJSON(rw http.ResponseWriter, code int, body string, kv ...string) {
	for i := 0; i+1 < len(kv); i += 2 {
		rw.Header().Set(kv[i], kv[i+1])
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(code)
	_, _ = io.WriteString(rw, body)
}
