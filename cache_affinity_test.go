package llmclient_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/routing"
)

// callLog records "upstream/key" for every call, across upstreams.
type callLog struct {
	mu    sync.Mutex
	calls []string
	fail  map[string]failure.Class // by key
}

// keyedUpstream records the key and upstream of every call and answers after 100 ms
// (virtual time); a key in the log's fail answers with that class of error instead.
type keyedUpstream struct {
	name string
	log  *callLog
}

func (p *keyedUpstream) Complete(ctx context.Context, call *llmclient.Call) (*llmclient.Response, error) {
	p.log.mu.Lock()
	p.log.calls = append(p.log.calls, p.name+"/"+call.APIKey)
	class, failing := p.log.fail[call.APIKey]
	p.log.mu.Unlock()
	select {
	case <-time.After(100 * time.Millisecond):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if failing {
		return nil, &llmclient.Error{Class: class, Status: 429, RetryAfter: 30 * time.Second}
	}
	return &llmclient.Response{Text: "ok", Usage: llmclient.Usage{InputTokens: 2000, OutputTokens: 5, TotalTokens: 2005}}, nil
}

func (*keyedUpstream) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, llmclient.ErrUnsupported
}

// setFail makes key fail with class c; failure.None makes it answer again.
func (l *callLog) setFail(key string, c failure.Class) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail == nil {
		l.fail = map[string]failure.Class{}
	}
	if c == failure.None {
		delete(l.fail, key)
	} else {
		l.fail[key] = c
	}
}

// prefixReq is a request whose first 5,000 bytes are the shared document doc, followed by
// the question q.
func prefixReq(doc, q string) *llmclient.Request {
	return &llmclient.Request{Model: "m", Messages: []llmclient.Message{
		llmclient.SystemMessage(strings.Repeat(doc+" ", 5000/(len(doc)+1)+1)),
		llmclient.UserMessage(q)}}
}

var poolKeys = []string{"sk-a", "sk-b", "sk-c", "sk-d"}

// concurrently makes the calls reqs at once and returns the "upstream/key" each went to,
// in the order the upstreams saw them.
func concurrently(t *testing.T, c *llmclient.Client, log *callLog, reqs []*llmclient.Request) []string {
	t.Helper()
	log.mu.Lock()
	log.calls = log.calls[:0]
	log.mu.Unlock()
	var wg sync.WaitGroup
	for _, req := range reqs {
		wg.Go(func() {
			if _, err := c.Complete(context.Background(), req); err != nil {
				t.Errorf("Complete: %v", err)
			}
		})
	}
	wg.Wait()
	log.mu.Lock()
	defer log.mu.Unlock()
	return append([]string(nil), log.calls...)
}

func distinct(xs []string) map[string]int {
	m := map[string]int{}
	for _, x := range xs {
		m[x]++
	}
	return m
}

// sharedDoc returns n requests sharing one long prefix, each with its own question.
func sharedDoc(doc string, n int) []*llmclient.Request {
	var reqs []*llmclient.Request
	for i := range n {
		reqs = append(reqs, prefixReq(doc, fmt.Sprintf("question %d?", i)))
	}
	return reqs
}

// TestCacheAffinityKeepsPrefixOnOneKey: eight calls at once sharing a 4 KiB prefix all use
// one key of a pool of four with WithCacheAffinity; without it (the default) the pool
// spreads them by calls in flight. Forty different prefixes spread over the pool.
func TestCacheAffinityKeepsPrefixOnOneKey(t *testing.T) {
	for _, on := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			log := &callLog{}
			up := &keyedUpstream{name: "u", log: log}
			opts := []llmclient.Option{llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: up, Keys: poolKeys})}
			if on {
				opts = append(opts, llmclient.WithCacheAffinity(4096))
			}
			c := newClient(t, opts...)
			got := distinct(concurrently(t, c, up.log, sharedDoc("The shared contract text", 8)))
			if on && len(got) != 1 {
				t.Errorf("with affinity, calls sharing a prefix went to %v, want one key", got)
			}
			if !on && len(got) == 1 {
				t.Errorf("without affinity (the default), 8 concurrent calls all went to %v", got)
			}
			if !on {
				return
			}
			var reqs []*llmclient.Request
			for i := range 40 {
				reqs = append(reqs, prefixReq(fmt.Sprintf("document number %d", i), "q?"))
			}
			if spread := distinct(concurrently(t, c, up.log, reqs)); len(spread) < 3 {
				t.Errorf("40 different prefixes went to %v, want them spread over the pool", spread)
			}
			// Short prompts have no affinity: they spread as usual.
			var short []*llmclient.Request
			for range 8 {
				short = append(short, chatReq("m"))
			}
			if got := distinct(concurrently(t, c, up.log, short)); len(got) == 1 {
				t.Errorf("8 short calls at once all went to %v: a prompt shorter than the prefix has no affinity", got)
			}
		})
	}
}

// TestCacheAffinityMovesOffAnUnusableKey: when the key a prefix ranks first cools down
// after a rate limit, or is evicted, the prefix's calls move to another key (the usual
// choice), and come back once the cooldown ends.
func TestCacheAffinityMovesOffAnUnusableKey(t *testing.T) {
	for _, class := range []failure.Class{failure.RateLimited, failure.Auth} {
		t.Run(class.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := &callLog{}
				up := &keyedUpstream{name: "u", log: log}
				c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: up, Keys: poolKeys}),
					llmclient.WithCacheAffinity(4096), llmclient.WithKeyCooldown(10*time.Second),
					llmclient.WithKeyEviction(time.Hour))
				reqs := sharedDoc("A long system prompt", 4)
				first := concurrently(t, c, up.log, reqs)
				ranked := first[0]
				up.log.setFail(strings.TrimPrefix(ranked, "u/"), class)
				moved := distinct(concurrently(t, c, up.log, reqs))
				if moved[ranked] == 0 {
					t.Fatalf("the ranked key %s was not tried first: %v", ranked, moved)
				}
				// The failed attempts moved to another key; later calls skip the ranked one.
				after := distinct(concurrently(t, c, up.log, reqs))
				if after[ranked] != 0 || len(after) == 0 {
					t.Errorf("with %s out (%s), calls went to %v", ranked, class, after)
				}
				if class == failure.RateLimited {
					up.log.setFail(strings.TrimPrefix(ranked, "u/"), failure.None)
					time.Sleep(time.Minute) // the cooldown (and the Retry-After) ends
					if back := distinct(concurrently(t, c, up.log, reqs)); len(back) != 1 || back[ranked] == 0 {
						t.Errorf("after the cooldown, calls went to %v, want all back on %s", back, ranked)
					}
				}
			})
		})
	}
}

// affinityGroup is three upstreams of one key each behind a least-in-flight group.
func affinityGroup(t *testing.T, log *callLog, opts ...llmclient.Option) *llmclient.Client {
	for _, name := range []string{"east", "west", "north"} {
		up := &keyedUpstream{name: name, log: log}
		opts = append(opts, llmclient.WithUpstream(llmclient.Upstream{Name: name, Provider: up, Keys: []string{"sk-" + name}}))
	}
	opts = append(opts, llmclient.WithModelGroup("m", "east", "west", "north"),
		llmclient.WithRouting("m", routing.LeastInFlight))
	return newClient(t, opts...)
}

// TestCacheAffinityAcrossUpstreams: in a least-in-flight group of three upstreams,
// calls at once sharing a prefix all start on one upstream; different prefixes spread
// over the three; a drained upstream's prefixes move, and come back when it is resumed.
func TestCacheAffinityAcrossUpstreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		c := affinityGroup(t, log, llmclient.WithCacheAffinity(4096))
		reqs := sharedDoc("Terms of service", 9)
		got := distinct(concurrently(t, c, log, reqs))
		if len(got) != 1 {
			t.Fatalf("calls sharing a prefix went to %v, want one upstream", got)
		}
		var ranked string
		for k := range got {
			ranked = strings.SplitN(k, "/", 2)[0]
		}
		var many []*llmclient.Request
		for i := range 30 {
			many = append(many, prefixReq(fmt.Sprintf("manual %d", i), "q?"))
		}
		if spread := distinct(concurrently(t, c, log, many)); len(spread) != 3 {
			t.Errorf("30 prefixes went to %v, want all three upstreams", spread)
		}
		if err := c.Drain(ranked, true); err != nil {
			t.Fatal(err)
		}
		for k := range distinct(concurrently(t, c, log, reqs)) {
			if strings.HasPrefix(k, ranked+"/") {
				t.Errorf("a call went to the drained upstream %s", ranked)
			}
		}
		if err := c.Drain(ranked, false); err != nil {
			t.Fatal(err)
		}
		if back := distinct(concurrently(t, c, log, reqs)); len(back) != 1 || back[ranked+"/sk-"+ranked] == 0 {
			t.Errorf("after the drain, calls went to %v, want all on %s", back, ranked)
		}
	})
	synctest.Test(t, func(t *testing.T) { // off by default: least in flight spreads them
		log := &callLog{}
		c := affinityGroup(t, log)
		if got := distinct(concurrently(t, c, log, sharedDoc("Terms of service", 9))); len(got) == 1 {
			t.Errorf("without affinity, 9 calls at once went to %v", got)
		}
	})
}

// TestCacheAffinityPromptCacheKey: calls with one PromptCacheKey share a key whatever their
// prompts, even short ones.
func TestCacheAffinityPromptCacheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		up := &keyedUpstream{name: "u", log: log}
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: up, Keys: poolKeys}),
			llmclient.WithCacheAffinity(4096))
		var reqs []*llmclient.Request
		for i := range 8 {
			req := chatReq("m")
			req.Messages[0] = llmclient.UserMessage(fmt.Sprintf("short %d", i))
			req.PromptCacheKey = "tenant-9"
			reqs = append(reqs, req)
		}
		if got := distinct(concurrently(t, c, up.log, reqs)); len(got) != 1 {
			t.Errorf("calls with one PromptCacheKey went to %v, want one key", got)
		}
	})
}

// TestCacheAffinityOptionBounds: the prefix must be in [0, 1 MiB].
func TestCacheAffinityOptionBounds(t *testing.T) {
	up := &keyedUpstream{name: "u", log: &callLog{}}
	for _, n := range []int{-1, 1<<20 + 1, math.MaxInt, math.MinInt} {
		if _, err := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: up}),
			llmclient.WithCacheAffinity(n)); err == nil {
			t.Errorf("WithCacheAffinity(%d) accepted", n)
		}
	}
	for _, n := range []int{0, 1, 1 << 20} {
		if _, err := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: up}),
			llmclient.WithCacheAffinity(n)); err != nil {
			t.Errorf("WithCacheAffinity(%d): %v", n, err)
		}
	}
}
