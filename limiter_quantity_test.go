package llmclient_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/provider/gemini"
	"github.com/llmclient/llmclient/ratelimit"
)

// TestQuotaScopeValidation: New names every problem of the quota scopes and the
// per-quantity limits: an upstream naming an undeclared scope, a scope without a name or
// declared twice, an empty model pattern, negative ITPM and OTPM, on keys and scopes.
func TestQuotaScopeValidation(t *testing.T) {
	up := func(l llmclient.Limits, scopes ...string) llmclient.Option {
		return llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: fake.New(), Limits: l, QuotaScopes: scopes})
	}
	for _, c := range []struct {
		name string
		opts []llmclient.Option
		want string
	}{
		{"unknown scope", []llmclient.Option{up(llmclient.Limits{}, "project")}, `unknown quota scope "project"`},
		{"scope named twice", []llmclient.Option{up(llmclient.Limits{}, "p", "p"),
			llmclient.WithQuotaScope(llmclient.QuotaScope{Name: "p"})}, `quota scope "p" named twice`},
		{"empty name", []llmclient.Option{up(llmclient.Limits{}), llmclient.WithQuotaScope(llmclient.QuotaScope{})}, "quota scope: empty name"},
		{"declared twice", []llmclient.Option{up(llmclient.Limits{}), llmclient.WithQuotaScope(llmclient.QuotaScope{Name: "p"}),
			llmclient.WithQuotaScope(llmclient.QuotaScope{Name: "p"})}, `quota scope "p": declared twice`},
		{"empty model", []llmclient.Option{up(llmclient.Limits{}), llmclient.WithQuotaScope(llmclient.QuotaScope{Name: "p", Models: []string{""}})}, "empty model pattern"},
		{"negative ITPM", []llmclient.Option{up(llmclient.Limits{ITPM: -1})}, "negative ITPM -1"},
		{"negative OTPM", []llmclient.Option{up(llmclient.Limits{OTPM: -5})}, "negative OTPM -5"},
		{"scope limits", []llmclient.Option{up(llmclient.Limits{}, "p"),
			llmclient.WithQuotaScope(llmclient.QuotaScope{Name: "p", Limits: llmclient.Limits{ITPM: -2}})}, `quota scope "p": limits: negative ITPM -2`},
	} {
		_, err := llmclient.New(c.opts...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one containing %q", c.name, err, c.want)
		}
	}
	if _, err := llmclient.New(up(llmclient.Limits{ITPM: 1 << 40, OTPM: 1}, "p"),
		llmclient.WithQuotaScope(llmclient.QuotaScope{Name: "p", Models: []string{"claude-opus-4*"}, Limits: llmclient.Limits{RPM: 5, OTPM: 8_000}})); err != nil {
		t.Errorf("valid scope and quantities: %v", err)
	}
}

// TestProviderQuotaRules: the adapters say how their vendor meters its token quotas.
func TestProviderQuotaRules(t *testing.T) {
	a, err := anthropic.New(anthropic.WithAPIKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := gemini.New(gemini.WithAPIKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	if r := a.QuotaRule(); !r.OutputOnUsage || !r.CacheReadsFree || r.InputOnly {
		t.Errorf("anthropic: %+v", r)
	}
	if r := g.QuotaRule(); !r.InputOnly || r.OutputOnUsage || r.CacheReadsFree {
		t.Errorf("gemini: %+v", r)
	}
}

// ruled is a fake provider whose vendor meters by rule.
type ruled struct {
	*fake.Provider
	rule ratelimit.Rule
}

func (p ruled) QuotaRule() ratelimit.Rule { return p.rule }

// TestOutputQuotaMeteredOnUsage: an output quota (Limits.OTPM) holds each call's reserved
// output while it is in flight; where the vendor counts output as generated
// (ratelimit.Rule.OutputOnUsage) the unused part comes back when the call ends, so calls that
// reserve a whole bucket but generate little follow each other at once, and where it
// charges the reservation (the zero rule) each one waits for the bucket to refill.
// Likewise an input quota (Limits.ITPM) charges cache reads only where the vendor counts
// them.
func TestOutputQuotaMeteredOnUsage(t *testing.T) {
	run := func(t *testing.T, rule ratelimit.Rule, l llmclient.Limits, u llmclient.Usage, req *llmclient.Request) time.Duration {
		var took time.Duration
		synctest.Test(t, func(t *testing.T) {
			p := ruled{fake.New(fake.Reply("ok").ReportUsage(u).Forever()), rule}
			c, err := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: p, Limits: l}))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			for range 5 {
				if _, err := c.Complete(context.Background(), req); err != nil {
					t.Fatal(err)
				}
			}
			took = time.Since(start)
		})
		return took
	}
	out := &llmclient.Request{Model: "m", MaxTokens: 1000, Messages: []llmclient.Message{llmclient.UserMessage("hi")}}
	l := llmclient.Limits{OTPM: 6_000} // a bucket of 1,000 output tokens, refilled at 100 a second
	small := llmclient.Usage{InputTokens: 10, OutputTokens: 10, TotalTokens: 20}
	if d := run(t, ratelimit.Rule{OutputOnUsage: true}, l, small, out); d > time.Second {
		t.Errorf("output counted as generated: five calls took %v, want no wait", d)
	}
	if d := run(t, ratelimit.Rule{}, l, small, out); d < 30*time.Second {
		t.Errorf("output reservation charged: five calls took %v, want about 40s of waits", d)
	}

	// Prompts of about 2,000 tokens, 95% read from the cache, against 3,000 input tokens
	// per minute (a bucket of 500): counted, each leaves a debt; free, they pass.
	in := &llmclient.Request{Model: "m", MaxTokens: 10, Messages: []llmclient.Message{llmclient.UserMessage(strings.Repeat("word ", 2000))}}
	li := llmclient.Limits{ITPM: 3_000, Metering: ratelimit.MeterUsage}
	cached := llmclient.Usage{InputTokens: 2000, CachedInputTokens: 1900, OutputTokens: 10, TotalTokens: 2010}
	free := run(t, ratelimit.Rule{CacheReadsFree: true}, li, cached, in)
	counted := run(t, ratelimit.Rule{}, li, cached, in)
	t.Logf("cached prompts: %v free, %v counted", free, counted)
	if !(free < counted/2) {
		t.Errorf("five cached prompts took %v with cache reads free, %v with them counted: want far less", free, counted)
	}
}

// TestOutputQuotaPacedByExpectedOutput: where the vendor counts output as generated, a
// key whose calls generate a quarter of their max_tokens is charged about that once it
// has seen a few answers, so four calls run at once within an output bucket that holds
// one call's max_tokens; charged their max_tokens, they would run one after another.
func TestOutputQuotaPacedByExpectedOutput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := llmclient.Usage{InputTokens: 10, OutputTokens: 250, TotalTokens: 260}
		p := ruled{fake.New(fake.Reply("ok").ReportUsage(u).Latency(2 * time.Second).Forever()), ratelimit.Rule{OutputOnUsage: true}}
		l := llmclient.Limits{OTPM: 6_000} // a bucket of 1,000 output tokens, refilled at 100 a second
		c, err := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: p, Limits: l}))
		if err != nil {
			t.Fatal(err)
		}
		req := &llmclient.Request{Model: "m", MaxTokens: 1000, Messages: []llmclient.Message{llmclient.UserMessage("hi")}}
		for range 5 { // what the key's calls generate, learned from their usage
			if _, err := c.Complete(context.Background(), req); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Minute) // the bucket full again
		start := time.Now()
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if _, err := c.Complete(context.Background(), req); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("four calls expected to generate 250 tokens each took %v, want about one call's 2s", d)
		}
	})
}

// cachingVendor answers like a vendor with a prompt cache whose reads its input quota
// does not count: a prompt of 2,000 input tokens writes 1,400 of them to the cache the
// first time it comes, and reads them every later time.
type cachingVendor struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (v *cachingVendor) QuotaRule() ratelimit.Rule { return ratelimit.Rule{CacheReadsFree: true} }

func (v *cachingVendor) Complete(_ context.Context, call *llmclient.Call) (*llmclient.Response, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	prompt := call.Request.Messages[0].Content[0].Text
	u := llmclient.Usage{InputTokens: 2000, CacheWriteTokens: 1400, OutputTokens: 10, TotalTokens: 2010}
	if v.seen[prompt] {
		u.CacheWriteTokens, u.CachedInputTokens = 0, 1400
	}
	v.seen[prompt] = true
	return &llmclient.Response{Text: "ok", FinishReason: finish.Stop, Usage: u}, nil
}

func (v *cachingVendor) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, llmclient.ErrUnsupported
}

// TestCacheReadsPredictedFromThePrefix: where the vendor does not count cache reads
// against its input quota, a prompt whose prefix the Client sent within the cache's
// lifetime is charged its estimate less what that call read from or wrote to the cache;
// a prompt it has not sent, or not for longer than the cache keeps it, is charged its
// estimate times the usage ratio of such prompts (here 1: their input all counts).
func TestCacheReadsPredictedFromThePrefix(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: &cachingVendor{seen: map[string]bool{}},
			Limits: llmclient.Limits{ITPM: 600_000}}))
		if err != nil {
			t.Fatal(err)
		}
		prompt := func(s string) *llmclient.Request {
			return &llmclient.Request{Model: "m", MaxTokens: 10, Messages: []llmclient.Message{llmclient.UserMessage(strings.Repeat(s+" ", 2000))}}
		}
		charged := func(req *llmclient.Request) (charged, estimated int) {
			t.Helper()
			resp, err := c.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			a := resp.Attempts[len(resp.Attempts)-1]
			return a.ChargedTokens, a.EstimatedTokens
		}
		a, b := prompt("alpha"), prompt("beta")
		if ch, est := charged(a); ch < est {
			t.Fatalf("first call: charged %d of an estimate of %d, want all of it", ch, est)
		}
		for range 3 { // sent again: 1,400 tokens of its input are read from the cache
			ch, est := charged(a)
			if want := est - 1400; ch > want+est/100 || ch < want {
				t.Errorf("the prefix sent before: charged %d of an estimate of %d, want about %d", ch, est, want)
			}
		}
		if ch, est := charged(b); ch < est {
			t.Errorf("another prompt: charged %d of an estimate of %d, want all of it", ch, est)
		}
		time.Sleep(6 * time.Minute) // the vendor's cache dropped the prefix
		if ch, est := charged(a); ch < est {
			t.Errorf("the prefix sent 6 minutes before: charged %d of an estimate of %d, want all of it", ch, est)
		}
	})
}

// quantityClient is a Client of one key with RPM, TPM, ITPM and OTPM limits (buckets of
// 2 requests, refilled at one each 5s; of 1,000 input and 1,000 output tokens, each
// refilled at 100 a second; a large TPM), whose upstream reports one token of input and
// output (the charges stand).
func quantityClient(t *testing.T, opts ...llmclient.Option) *llmclient.Client {
	t.Helper()
	p := fake.New(fake.Reply("ok").ReportUsage(llmclient.Usage{InputTokens: 1, OutputTokens: 1, TotalTokens: 2}).Forever())
	l := llmclient.Limits{RPM: 12, RequestBurst: 2, TPM: 1 << 30, ITPM: 6_000, OTPM: 6_000}
	c, err := llmclient.New(append([]llmclient.Option{llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: p, Limits: l})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// quantityRequest asks for maxTokens of output after a prompt of about words tokens.
func quantityRequest(words, maxTokens int) *llmclient.Request {
	return &llmclient.Request{Model: "m", MaxTokens: maxTokens,
		Messages: []llmclient.Message{llmclient.UserMessage(strings.Repeat("word ", words))}}
}

// TestQuantityRefusalReservesNothing: a request that one quantity of a key refuses (here
// the output or the input tokens, fail-fast) takes nothing from the others: the request
// after it finds every bucket as the request before left it. Without the refused request
// in between (admitted instead), the same request after it is refused.
func TestQuantityRefusalReservesNothing(t *testing.T) {
	for _, c := range []struct {
		name    string
		refused *llmclient.Request // refused by one quantity, after first
		control *llmclient.Request // the same charges on the others, admitted
	}{
		// After first, 200 output tokens are left: 800 more do not fit; the prompt would
		// take about 600 of the input tokens, and the request the last of the two
		// requests.
		{"by output tokens", quantityRequest(600, 800), quantityRequest(600, 100)},
		// After first and a prompt of about 600, about 400 input tokens are left.
		{"by input tokens", quantityRequest(1200, 100), quantityRequest(600, 100)},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, control := range []bool{false, true} {
				synctest.Test(t, func(t *testing.T) {
					cl := quantityClient(t, llmclient.WithLimiterMode(ratelimit.FailFast))
					ctx := context.Background()
					if _, err := cl.Complete(ctx, quantityRequest(5, 800)); err != nil {
						t.Fatal(err)
					}
					if control {
						if _, err := cl.Complete(ctx, c.control); err != nil {
							t.Fatalf("control: %v", err)
						}
					} else if _, err := cl.Complete(ctx, c.refused); !errors.Is(err, llmclient.ErrRateLimited) {
						t.Fatalf("the request over one quantity: err %v, want ErrRateLimited", err)
					}
					_, err := cl.Complete(ctx, quantityRequest(600, 150))
					switch {
					case !control && err != nil:
						t.Errorf("after a refused request: %v, want the buckets it found", err)
					case control && !errors.Is(err, llmclient.ErrRateLimited):
						t.Errorf("control, after an admitted request: err %v, want ErrRateLimited", err)
					}
				})
			}
		})
	}
}

// TestQuantityCanceledWaitGivesBackEveryQuantity: a request that waits for one quantity
// (input tokens) and is canceled while it waits gives back what it reserved on every
// quantity: requests, input and output tokens. The request after it, which needs all
// three at once within 100ms, is admitted; when the first request is not canceled, that
// request is refused.
func TestQuantityCanceledWaitGivesBackEveryQuantity(t *testing.T) {
	for _, cancel := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			cl := quantityClient(t)
			// 1 request, about 400 input and 200 output tokens left.
			if _, err := cl.Complete(context.Background(), quantityRequest(600, 800)); err != nil {
				t.Fatal(err)
			}
			// About 200 input tokens short: a wait of about 2s, which reserves the last
			// request, the input tokens and 250 output tokens.
			ctx, stop := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := cl.Complete(ctx, quantityRequest(600, 250))
				done <- err
			}()
			time.Sleep(time.Second)
			synctest.Wait()
			if cancel {
				stop()
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Fatalf("canceled while waiting: err %v", err)
				}
			}
			// At 1s: 1.2 requests, about 500 input and 300 output tokens when every
			// quantity was given back.
			dl, cancelDL := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancelDL()
			_, err := cl.Complete(dl, quantityRequest(5, 280))
			switch {
			case cancel && err != nil:
				t.Errorf("after a canceled wait: %v, want every quantity given back", err)
			case !cancel && !errors.Is(err, llmclient.ErrRateLimited):
				t.Errorf("while the first waits: err %v, want ErrRateLimited", err)
			}
			if !cancel {
				if err := <-done; err != nil {
					t.Errorf("the waiting request: %v", err)
				}
			}
			stop()
		})
	}
}
