package llmclient_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
)

// README's defaults table, line by line where no other test pins the default itself:
// each test runs a Client with no option for the setting it checks.

// timedFake is a fake provider that records when each call started.
type timedFake struct {
	mu    sync.Mutex
	times []time.Time
	step  func(n int) fake.Step
}

func (f *timedFake) provider() *fake.Provider {
	return fake.New(fake.Func(func(*llmclient.Call) fake.Step {
		f.mu.Lock()
		f.times = append(f.times, time.Now())
		n := len(f.times)
		f.mu.Unlock()
		return f.step(n)
	}).Times(1 << 30))
}

func (f *timedFake) gaps() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var g []time.Duration
	for i := 1; i < len(f.times); i++ {
		g = append(g, f.times[i].Sub(f.times[i-1]))
	}
	return g
}

// TestAuditDefaultAttemptsAndBackoff: "3 per upstream, 6 per call"; "500 ms doubling to
// 30 s, ±50% jitter" between the attempts on one upstream.
func TestAuditDefaultAttemptsAndBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &timedFake{step: func(int) fake.Step { return fake.Fail(500) }}
		c := newClient(t, up("a", f.provider()))
		if _, err := c.Complete(context.Background(), chatReq("m")); err == nil {
			t.Fatal("an upstream failing every call: want an error")
		}
		g := f.gaps()
		if len(g) != 2 {
			t.Fatalf("%d attempts on one upstream, want 3", len(g)+1)
		}
		if g[0] < 250*time.Millisecond || g[0] > 750*time.Millisecond || g[1] < 500*time.Millisecond || g[1] > 1500*time.Millisecond {
			t.Errorf("backoff gaps %v, want within 500ms±50%% and 1s±50%%", g)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		var ps []*fake.Provider
		var opts []llmclient.Option
		for _, n := range []string{"a", "b", "c", "d"} {
			p := fake.New(fake.Fail(500).Forever())
			ps = append(ps, p)
			opts = append(opts, up(n, p))
		}
		c := newClient(t, opts...)
		_, err := c.Complete(context.Background(), chatReq("m"))
		var e *llmclient.Error
		if !errors.As(err, &e) {
			t.Fatalf("four failing upstreams: %v", err)
		}
		total := 0
		for i, p := range ps {
			total += p.Calls()
			if p.Calls() > 3 {
				t.Errorf("upstream %d called %d times, want at most 3", i, p.Calls())
			}
		}
		if total != 6 {
			t.Errorf("%d upstream calls in one call, want the cap of 6", total)
		}
	})
}

// TestAuditDefaultMaxRetryAfter: "longest Retry-After waited: 1 min (longer: fail over)":
// alone, a Retry-After of 60 s is waited and the call served; one of 61 s ends the call
// at once; with a backup, 61 s moves to it at once.
func TestAuditDefaultMaxRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, up("a", fake.New(fake.Fail(429).RetryAfter(time.Minute), fake.Reply("ok").Forever())))
		var err error
		if d := elapsed(func() { _, err = c.Complete(context.Background(), chatReq("m")) }); err != nil || d < time.Minute || d > time.Minute+time.Second {
			t.Errorf("Retry-After 60s: err %v after %v, want served after a minute", err, d)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Fail(429).RetryAfter(61*time.Second), fake.Reply("ok").Forever())
		c := newClient(t, up("a", p))
		var err error
		if d := elapsed(func() { _, err = c.Complete(context.Background(), chatReq("m")) }); err == nil || d != 0 || p.Calls() != 1 {
			t.Errorf("Retry-After 61s alone: err %v after %v, %d calls; want an error at once after one call", err, d, p.Calls())
		}
	})
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, up("a", fake.New(fake.Fail(429).RetryAfter(61*time.Second), fake.Reply("ok").Forever())),
			up("b", fake.New(fake.Reply("b").Forever())))
		var resp *llmclient.Response
		var err error
		if d := elapsed(func() { resp, err = c.Complete(context.Background(), chatReq("m")) }); err != nil || resp.Upstream != "b" || d != 0 {
			t.Errorf("Retry-After 61s with a backup: %v, err %v after %v; want b at once", upstreamOf(resp), err, d)
		}
	})
}

// TestAuditDefaultKeyCooldownAndEviction: "key cooldown after a 429 without Retry-After:
// 1 s"; "key eviction after a 401 or an exhausted quota: 1 h".
func TestAuditDefaultKeyCooldownAndEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Fail(429), fake.Reply("ok").Forever())
		c := newClient(t, up("a", p, "k1"))
		if _, err := c.Complete(withOpts(context.Background(), llmclient.CallOptions{MaxAttempts: 1}), chatReq("m")); err == nil {
			t.Fatal("the 429 with one attempt: want an error")
		}
		var err error
		if d := elapsed(func() { _, err = c.Complete(context.Background(), chatReq("m")) }); err != nil || d > time.Second || d < 900*time.Millisecond {
			t.Errorf("next call on the cooling key: err %v after %v, want served after the 1s cooldown", err, d)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Fail(401), fake.Reply("ok").Forever())
		c := newClient(t, up("a", p, "k1"))
		if _, err := c.Complete(context.Background(), chatReq("m")); err == nil {
			t.Fatal("a 401 on the only key: want an error")
		}
		time.Sleep(time.Hour - time.Second)
		if _, err := c.Complete(context.Background(), chatReq("m")); !errors.Is(err, llmclient.ErrNoKey) || p.Calls() != 1 {
			t.Errorf("a second before the hour: err %v, calls %d; want ErrNoKey and no call", err, p.Calls())
		}
		time.Sleep(2 * time.Second)
		if _, err := c.Complete(context.Background(), chatReq("m")); err != nil {
			t.Errorf("after the hour: %v", err)
		}
	})
}

// TestAuditDefaultReservedOutput: "reserved output 1,024 tokens when MaxTokens is 0": the
// estimate of a request without MaxTokens is 1,023 tokens above the same request with
// MaxTokens 1.
func TestAuditDefaultReservedOutput(t *testing.T) {
	c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Reply("ok").Forever()),
		Limits: llmclient.Limits{TPM: 1_000_000}}))
	est := func(maxTokens int) int {
		req := chatReq("gpt-4o")
		req.MaxTokens = maxTokens
		resp, err := c.Complete(context.Background(), req)
		if err != nil || len(resp.Attempts) == 0 {
			t.Fatalf("MaxTokens %d: %v", maxTokens, err)
		}
		return resp.Attempts[0].EstimatedTokens
	}
	if d := est(0) - est(1); d != 1023 {
		t.Errorf("estimate without MaxTokens minus with MaxTokens 1: %d, want 1023", d)
	}
}

// TestAuditDefaultTransportAttemptTimeout: "attempt timeout, Transport one-shot: 10 min
// when neither the upstream nor WithAttemptTimeout sets one" (the call budget off, so that
// only the attempt timeout bounds the attempt).
func TestAuditDefaultTransportAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var starts []time.Time
		hang := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			starts = append(starts, time.Now())
			n := len(starts)
			mu.Unlock()
			if n == 1 {
				<-r.Context().Done()
				return
			}
			ok(chatOK)(w, r)
		})
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithCallBudget(0))
		rt := c.Transport(memTransport{hang})
		resp, err := post(t, context.Background(), rt, "http://oai.test/v1/chat/completions",
			`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = readBody(t, resp)
		mu.Lock()
		defer mu.Unlock()
		if resp.StatusCode != 200 || len(starts) != 2 {
			t.Fatalf("status %d after %d attempts, want 200 after 2", resp.StatusCode, len(starts))
		}
		if g := starts[1].Sub(starts[0]); g < 10*time.Minute || g > 10*time.Minute+2*time.Second {
			t.Errorf("the hung attempt ended after %v (plus backoff), want 10m", g)
		}
	})
}

// TestAuditDefaultBreaker: "breaker: trip … 10 failures in a row"; "open 15 s, doubling
// per failed probe"; the breaker's default configuration through a Client, with a backup
// so that every call succeeds.
func TestAuditDefaultBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Fail(500).Forever())
		c := newClient(t, up("a", a), up("b", fake.New(fake.Reply("b").Forever())), llmclient.WithMaxAttempts(1))
		call := func() {
			t.Helper()
			if _, err := c.Complete(context.Background(), chatReq("m")); err != nil {
				t.Fatal(err)
			}
		}
		for range 9 {
			call()
		}
		if s := c.Breaker("a").State(); s.String() != "closed" {
			t.Fatalf("after 9 failures in a row: %v, want closed", s)
		}
		call()
		if s := c.Breaker("a").State(); s.String() != "open" {
			t.Fatalf("after 10 failures in a row: %v, want open", s)
		}
		calls := a.Calls()
		time.Sleep(15*time.Second - time.Millisecond)
		call()
		if a.Calls() != calls {
			t.Errorf("a was called before its 15 s open period ended")
		}
		time.Sleep(time.Millisecond)
		call() // the probe fails: open for 30 s
		if a.Calls() != calls+1 {
			t.Fatalf("a probed %d times at 15 s, want once", a.Calls()-calls)
		}
		time.Sleep(30*time.Second - time.Millisecond)
		call()
		if a.Calls() != calls+1 {
			t.Errorf("a was called before its doubled open period (30 s) ended")
		}
		time.Sleep(time.Millisecond)
		call()
		if a.Calls() != calls+2 {
			t.Errorf("a probed %d times at 30 s after the failed probe, want once", a.Calls()-calls-1)
		}
	})
}
