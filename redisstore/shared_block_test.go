package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/ratelimit"
)

// refusesKey answers every call on one key with an error (a 429 with a Retry-After, or a
// 401), every other call with "ok", and counts the calls per key.
type refusesKey struct {
	key string
	err *llmclient.Error
	mu  sync.Mutex
	n   map[string]int
}

func (p *refusesKey) Complete(_ context.Context, c *llmclient.Call) (*llmclient.Response, error) {
	p.mu.Lock()
	p.n[c.APIKey]++
	p.mu.Unlock()
	if c.APIKey == p.key {
		e := *p.err
		return nil, &e
	}
	return &llmclient.Response{Text: "ok", FinishReason: finish.Stop}, nil
}

func (p *refusesKey) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, llmclient.ErrUnsupported
}

func (p *refusesKey) calls(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[key]
}

// TestSharedBlocksWithoutLimits: a key's pause (a 429's Retry-After) and its eviction (a
// 401) are shared through the store although the upstream has no Limits, and a replica
// created afterwards sees them: it sends nothing on the key, moves to the pool's other
// key, and with the key alone refuses at once. The block is ten minutes long, far beyond
// anything a loaded machine adds to the test.
func TestSharedBlocksWithoutLimits(t *testing.T) {
	srv := startRedis(t)
	for _, tc := range []struct {
		name string
		err  *llmclient.Error
	}{
		{"pause", &llmclient.Error{Class: failure.RateLimited, Status: 429, RetryAfter: 10 * time.Minute}},
		{"eviction", &llmclient.Error{Class: failure.Auth, Status: 401}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &refusesKey{key: "sk-blocked-" + tc.name, err: tc.err, n: map[string]int{}}
			other := "sk-other-" + tc.name
			newClient := func(keys ...string) *llmclient.Client {
				c, err := llmclient.New(
					llmclient.WithUpstream(llmclient.Upstream{Name: "vendor", Provider: p, Keys: keys}),
					llmclient.WithLimitStore(srv.store()),
					llmclient.WithLimiterMode(ratelimit.FailFast),
					llmclient.WithDecision(failure.RateLimited, llmclient.Decision{Cooldown: true}), // no retry
				)
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			if _, err := newClient(p.key).Complete(ctx(t), hello()); llmclient.ClassOf(err) != tc.err.Class {
				t.Fatalf("replica a: %v, want the upstream's %v", err, tc.err.Class)
			}
			if p.calls(p.key) != 1 {
				t.Fatalf("%d calls on the key, want 1", p.calls(p.key))
			}
			// Replicas created after the block.
			b := newClient(p.key, other)
			for i := range 4 {
				if _, err := b.Complete(ctx(t), hello()); err != nil {
					t.Fatalf("replica b, call %d: %v", i, err)
				}
			}
			if n := p.calls(p.key); n != 1 {
				t.Fatalf("replica b sent %d calls on the blocked key", n-1)
			}
			if n := p.calls(other); n != 4 {
				t.Fatalf("replica b sent %d calls on its other key, want 4", n)
			}
			began := time.Now()
			_, err := newClient(p.key).Complete(ctx(t), hello())
			if !errors.Is(err, llmclient.ErrNoKey) || p.calls(p.key) != 1 {
				t.Fatalf("replica c with the blocked key alone: %v after %d calls, want ErrNoKey without a call", err, p.calls(p.key)-1)
			}
			t.Logf("replica c refused in %v: %v", time.Since(began), err)
		})
	}
}

// RestoreKey lifts a key's pause and eviction in the store: the replica that restored it
// and a replica created afterwards both call with it again.
func TestRestoreKeyLiftsSharedBlock(t *testing.T) {
	srv := startRedis(t)
	for _, tc := range []struct {
		name string
		err  *llmclient.Error
	}{
		{"pause", &llmclient.Error{Class: failure.RateLimited, Status: 429, RetryAfter: 10 * time.Minute}},
		{"eviction", &llmclient.Error{Class: failure.Auth, Status: 401}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "sk-restored-" + tc.name
			p := &refusesKey{key: key, err: tc.err, n: map[string]int{}}
			newClient := func() *llmclient.Client {
				c, err := llmclient.New(
					llmclient.WithUpstream(llmclient.Upstream{Name: "vendor", Provider: p, Keys: []string{key}}),
					llmclient.WithLimitStore(srv.store()),
					llmclient.WithLimiterMode(ratelimit.FailFast),
					llmclient.WithDecision(failure.RateLimited, llmclient.Decision{Cooldown: true}),
				)
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			a := newClient()
			if _, err := a.Complete(ctx(t), hello()); llmclient.ClassOf(err) != tc.err.Class {
				t.Fatalf("first call: %v, want the upstream's %v", err, tc.err.Class)
			}
			if _, err := newClient().Complete(ctx(t), hello()); !errors.Is(err, llmclient.ErrNoKey) && !errors.Is(err, llmclient.ErrRateLimited) {
				t.Fatalf("a new replica before the restore: %v, want a local refusal", err)
			}
			if err := a.RestoreKey("vendor", "key#1"); err != nil {
				t.Fatal(err)
			}
			p.mu.Lock()
			p.key = "" // the upstream answers the key from now on
			p.mu.Unlock()
			for i, c := range []*llmclient.Client{a, newClient()} {
				if _, err := c.Complete(ctx(t), hello()); err != nil {
					t.Fatalf("replica %d after the restore: %v", i, err)
				}
			}
		})
	}
}
