package conformance

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
)

// apiKey is the credential every case configures: recognizable, so a leak is found by a
// plain substring search.
const apiKey = "sk-cf-SECRET-4d3c2b1a0f9e"

// memBaseURL is the base URL of in-memory upstreams; nothing is ever dialed.
const memBaseURL = "http://upstream.conformance.invalid"

// callTimeout bounds each case that runs in real time.
const callTimeout = 30 * time.Second

// maxChunks bounds the chunks read from one stream, so a stream that never ends fails.
const maxChunks = 10_000

// The modes each scenario runs in, as the last element of its test name.
const (
	// ModeProvider calls the adapter directly, over an in-memory transport.
	ModeProvider = "provider"
	// ModeClient calls through an llmclient.Client with WithMaxAttempts(1), so the class
	// of every failure is observed as it is. The upstream has no key pool: the adapter
	// authenticates with its own key.
	ModeClient = "client"
	// ModeClientRetry calls through a Client with the default retry policy, inside a
	// testing/synctest bubble, with a successful reply scripted after the failure: a
	// retryable failure must be retried after its Retry-After (or a backoff) and succeed,
	// any other must not be retried. The upstream has a key pool of one, so the key
	// travels in each Call. Failure scenarios only.
	ModeClientRetry = "client_retry"
	// ModeLoopbackProvider repeats ModeProvider over a real HTTP server on 127.0.0.1.
	// Wire targets and scenarios marked Loopback only.
	ModeLoopbackProvider = "loopback_provider"
	// ModeLoopbackClient repeats ModeClient over a real HTTP server on 127.0.0.1. Wire
	// targets and scenarios marked Loopback only.
	ModeLoopbackClient = "loopback_client"
)

// Run runs every scenario of Scenarios against target, as subtests named
// "<scenario>/<mode>". A scenario the target's Wire or Script reports as not applicable is
// skipped with the reason; a case listed in target.KnownGaps is excluded with a log line.
// Run keeps no state between calls: parallel tests may call it for different targets.
func Run(t *testing.T, target Target) {
	t.Helper()
	if err := target.validate(); err != nil {
		t.Fatal(err)
	}
	scenarios := Scenarios()
	gaps := make(map[string]string, len(target.KnownGaps))
	all := make(map[string]bool)
	for i := range scenarios {
		for _, m := range modes(&scenarios[i], &target) {
			all[scenarios[i].Name+"/"+m] = true
		}
	}
	for _, g := range target.KnownGaps {
		if !all[g.Case] {
			t.Errorf("known gap %q names no case of the suite", g.Case)
		}
		gaps[g.Case] = g.Why
	}
	for i := range scenarios {
		sc := &scenarios[i]
		t.Run(sc.Name, func(t *testing.T) {
			if why := target.notApplicable(sc); why != "" {
				t.Skipf("not applicable to %s: %s", target.Name, why)
			}
			for _, m := range modes(sc, &target) {
				t.Run(m, func(t *testing.T) {
					probs := runMode(t, &target, sc, m)
					why, gap := gaps[sc.Name+"/"+m]
					switch {
					case gap && len(probs) > 0:
						t.Logf("known gap of %s, excluded: %s", target.Name, why)
						for _, p := range probs {
							t.Logf("  still fails: %s", p)
						}
						t.Skip("known gap")
					case gap:
						t.Errorf("known gap no longer reproduces; remove it from KnownGaps: %s", why)
					}
					for _, p := range probs {
						t.Error(p)
					}
				})
			}
		})
	}
}

func (tg *Target) validate() error {
	switch {
	case tg.Name == "":
		return errors.New("conformance: Target.Name is empty")
	case (tg.Wire == nil) == (tg.Script == nil):
		return fmt.Errorf("conformance: target %q: set exactly one of Wire and Script", tg.Name)
	}
	return nil
}

// modes returns the modes scenario sc runs in for tg.
func modes(sc *Scenario, tg *Target) []string {
	out := []string{ModeProvider, ModeClient}
	if sc.Want.Class != failure.None {
		out = append(out, ModeClientRetry)
	}
	if sc.Loopback && tg.Wire != nil {
		out = append(out, ModeLoopbackProvider, ModeLoopbackClient)
	}
	return out
}

// notApplicable asks the target whether it can produce every reply of sc, and returns why
// not, or "".
func (tg *Target) notApplicable(sc *Scenario) string {
	rec, _ := recovery()
	replies := []Reply{sc.Reply, rec}
	if sc.Then != nil {
		replies = append(replies, sc.Then.Reply)
	}
	for i := range replies {
		seen := &Seen{Stream: sc.Stream, Model: sc.Request.Model, APIKey: apiKey}
		var err error
		if tg.Wire != nil {
			_, err = tg.Wire.Render(&replies[i], seen)
		} else {
			_, err = tg.Script.Render(&replies[i], seen)
		}
		if errors.Is(err, ErrNotApplicable) {
			return strings.TrimPrefix(err.Error(), ErrNotApplicable.Error()+": ")
		}
	}
	return ""
}

// runMode runs one case and returns its problems.
func runMode(t *testing.T, tg *Target, sc *Scenario, mode string) []string {
	switch mode {
	case ModeProvider:
		return runDirect(tg, sc, false)
	case ModeLoopbackProvider:
		return runDirect(tg, sc, true)
	case ModeClient:
		return runClient(tg, sc, false)
	case ModeLoopbackClient:
		return runClient(tg, sc, true)
	case ModeClientRetry:
		var probs []string
		synctest.Test(t, func(t *testing.T) { probs = runRetry(tg, sc) })
		return probs
	}
	return []string{"unknown mode " + mode}
}

// env is one case's upstream and the adapter pointed at it.
type env struct {
	up       *upstream
	provider llmclient.Provider
	close    func()
}

// newEnv builds the upstream for replies and the adapter, in memory or over loopback.
func newEnv(tg *Target, stream bool, replies []Reply, loopback bool) (*env, error) {
	up := newUpstream(tg, stream, replies)
	e := &env{up: up, close: func() {}}
	var err error
	switch {
	case tg.Script != nil:
		e.provider, err = tg.Script.NewProvider(up.serve, apiKey)
	case loopback:
		srv := httptest.NewServer(up.handler())
		e.close = srv.Close
		hc := &http.Client{Transport: &tracker{base: srv.Client().Transport, up: up}}
		e.provider, err = tg.Wire.NewProvider(srv.URL, hc, apiKey)
	default:
		hc := &http.Client{Transport: &tracker{base: memTransport{up: up}, up: up}}
		e.provider, err = tg.Wire.NewProvider(memBaseURL, hc, apiKey)
	}
	if err == nil && e.provider == nil {
		err = errors.New("NewProvider returned nil")
	}
	if err != nil {
		e.close()
		return nil, fmt.Errorf("building the %s adapter: %w", tg.Name, err)
	}
	return e, nil
}

// replies returns the replies of sc's case: the first call's and the follow-up's.
func (sc *Scenario) replies() []Reply {
	out := []Reply{sc.Reply}
	if sc.Then != nil {
		out = append(out, sc.Then.Reply)
	}
	return out
}

// caller makes one call of a case: through the adapter or through a Client.
type caller func(ctx context.Context, req *llmclient.Request, stream bool) *result

// runDirect runs sc against the adapter itself.
func runDirect(tg *Target, sc *Scenario, loopback bool) []string {
	e, err := newEnv(tg, sc.Stream, sc.replies(), loopback)
	if err != nil {
		return []string{err.Error()}
	}
	defer e.close()
	call := func(ctx context.Context, req *llmclient.Request, stream bool) *result {
		return callProvider(ctx, e.provider, &llmclient.Call{Request: req, Model: req.Model}, stream)
	}
	return runCase(tg, sc, e, call, levelProvider, "")
}

// runClient runs sc through a Client that makes one attempt per call.
func runClient(tg *Target, sc *Scenario, loopback bool) []string {
	e, err := newEnv(tg, sc.Stream, sc.replies(), loopback)
	if err != nil {
		return []string{err.Error()}
	}
	defer e.close()
	name := upstreamName(tg)
	// No key pool: the adapter authenticates with its own key, so the Client cannot
	// redact what it does not know and the adapter's own redaction is what counts.
	c, err := llmclient.New(
		llmclient.WithUpstream(llmclient.Upstream{Name: name, Provider: e.provider}),
		llmclient.WithMaxAttempts(1))
	if err != nil {
		return []string{"llmclient.New: " + err.Error()}
	}
	return runCase(tg, sc, e, clientCaller(c), levelClient, name)
}

func upstreamName(tg *Target) string { return "conformance-" + tg.Name }

func clientCaller(c *llmclient.Client) caller {
	return func(ctx context.Context, req *llmclient.Request, stream bool) *result {
		return callClient(ctx, c, req, stream)
	}
}

// runCase makes the scenario's call (and its follow-up) with call and checks the results.
func runCase(tg *Target, sc *Scenario, e *env, call caller, lv level, name string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req := cloneRequest(&sc.Request)
	r := call(ctx, req, sc.Stream)
	calls := 1
	log := e.up.exchanges()
	var p problems
	if len(log) > 0 {
		checkSeen(&p, log[0].seen, req, apiKey)
	}
	p = append(p, check(resolve(&sc.Want, lv, sc.Stream, name, 1, log, 0), r)...)
	if sc.Then != nil && r.err == nil && r.resp != nil && len(r.resp.ToolCalls) > 0 {
		next := followUp(req, r.resp, sc.Then.ToolResult)
		r2 := call(ctx, next, sc.Stream)
		calls++
		log = e.up.exchanges()
		if len(log) > 1 {
			checkSeen(&p, log[1].seen, next, apiKey)
			checkRoundTrip(&p, log[1].seen, r.resp.ToolCalls, sc.Then.ToolResult)
		}
		for _, s := range check(resolve(&sc.Then.Want, lv, sc.Stream, name, 1, log, 1), r2) {
			p.add("follow-up: %s", s)
		}
	}
	if n := len(e.up.exchanges()); n != calls {
		p.add("upstream received %d calls, want %d", n, calls)
	}
	return append(p, e.up.report(tg.Wire != nil)...)
}

// runRetry runs sc through a Client with the default retry policy, with a successful reply
// scripted after the scenario's. It runs inside a synctest bubble, so waits take no time.
func runRetry(tg *Target, sc *Scenario) []string {
	rec, recWant := recovery()
	e, err := newEnv(tg, sc.Stream, []Reply{sc.Reply, rec}, false)
	if err != nil {
		return []string{err.Error()}
	}
	defer e.close()
	name := upstreamName(tg)
	// A key pool of one: the Client passes the key with every Call. Stream continuation,
	// which restarts a broken stream with a different scripted answer, is tested at the root.
	c, err := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{Name: name, Provider: e.provider, Keys: []string{apiKey}}),
		llmclient.WithStreamContinuation(false))
	if err != nil {
		return []string{"llmclient.New: " + err.Error()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	req := cloneRequest(&sc.Request)
	r := callClient(ctx, c, req, sc.Stream)
	log := e.up.exchanges()
	var p problems
	if !retryable(&sc.Want) {
		p = append(p, check(resolve(&sc.Want, levelClient, sc.Stream, name, 1, log, 0), r)...)
		if len(log) != 1 {
			p.add("a %s failure was tried %d times; it must not be retried", clientClass(&sc.Want), len(log))
		}
		return append(p, e.up.report(tg.Wire != nil)...)
	}
	p = append(p, check(resolve(&recWant, levelClient, sc.Stream, name, 2, log, 1), r)...)
	if len(log) != 2 {
		p.add("upstream received %d calls, want 2 (the failure, then its retry)", len(log))
	}
	if r.err == nil && r.resp != nil && len(r.resp.Attempts) == 2 {
		a := r.resp.Attempts[0]
		want := resolve(&sc.Want, levelClient, sc.Stream, name, 1, log, 0)
		if a.Class != clientClass(&sc.Want) {
			p.add("Attempts[0].Class = %s, want %s", a.Class, clientClass(&sc.Want))
		}
		if want.status >= 0 && a.Status != want.status {
			p.add("Attempts[0].Status = %d, want %d", a.Status, want.status)
		}
		if a.RetryAfter != sc.Want.RetryAfter {
			p.add("Attempts[0].RetryAfter = %v, want %v", a.RetryAfter, sc.Want.RetryAfter)
		}
		if lo, hi := retryWaitBounds(&sc.Want); r.resp.Attempts[1].Waited < lo || r.resp.Attempts[1].Waited > hi {
			p.add("the retry waited %v, want between %v and %v", r.resp.Attempts[1].Waited, lo, hi)
		}
	}
	return append(p, e.up.report(tg.Wire != nil)...)
}

// clientClass is the class a Client reports for w's failure.
func clientClass(w *Want) failure.Class {
	if w.AfterFirstToken {
		return failure.StreamInterrupted
	}
	return w.Class
}

// retryable reports whether the default decisions retry w's failure on a single-key
// upstream: auth retries only on another key, and nothing is retried after the first token
// (a broken stream's decision applies to its continuation, off here).
func retryable(w *Want) bool {
	c := clientClass(w)
	return llmclient.DefaultDecision(c).Retry && c != failure.Auth && c != failure.QuotaExhausted &&
		c != failure.StreamInterrupted
}

// resolve turns w into the expectation for the call answered by log[i].
func resolve(w *Want, lv level, stream bool, name string, attempts int, log []exchange, i int) *expect {
	e := &expect{Want: *w, level: lv, stream: stream, model: Model, key: apiKey, upstream: name, attempts: attempts}
	e.status = -1
	if i < len(log) && log[i].reply != nil {
		r := log[i].reply
		switch {
		case r.Fail != nil:
			e.status = log[i].status
			e.httpErr = e.status < 200 || e.status > 299
		case stream && (r.End == EndError || r.End == EndCut):
			// The stream began with its HTTP status: a break later does not undo it.
			e.status = log[i].status
		}
	}
	return e
}
