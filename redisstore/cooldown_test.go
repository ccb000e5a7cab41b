package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
)

// rateLimitedOnce answers the first call with a 429 and a Retry-After, then succeeds; it
// notes when each call arrived.
type rateLimitedOnce struct {
	retryAfter time.Duration
	mu         sync.Mutex
	calls      []time.Time
}

func (p *rateLimitedOnce) Complete(_ context.Context, _ *llmclient.Call) (*llmclient.Response, error) {
	p.mu.Lock()
	p.calls = append(p.calls, time.Now())
	n := len(p.calls)
	p.mu.Unlock()
	if n == 1 {
		return nil, &llmclient.Error{Class: failure.RateLimited, Status: 429, RetryAfter: p.retryAfter}
	}
	return &llmclient.Response{Text: "ok", FinishReason: finish.Stop}, nil
}

func (p *rateLimitedOnce) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, llmclient.ErrUnsupported
}

// TestCooldownAcrossReplicas: a 429 seen by one replica pauses the key for the others.
func TestCooldownAcrossReplicas(t *testing.T) {
	srv := startRedis(t)
	const retryAfter = time.Second
	p := &rateLimitedOnce{retryAfter: retryAfter}
	newClient := func() *llmclient.Client {
		c, err := llmclient.New(
			llmclient.WithUpstream(llmclient.Upstream{Name: "vendor", Provider: p, Keys: []string{"sk-shared"},
				Limits: llmclient.Limits{RPM: 6000}}),
			llmclient.WithLimitStore(srv.store()),
			llmclient.WithDecision(failure.RateLimited, llmclient.Decision{Cooldown: true}), // no retry
		)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := newClient(), newClient()
	req := &llmclient.Request{Model: "m", Messages: []llmclient.Message{
		{Role: llmclient.RoleUser, Content: []llmclient.Part{llmclient.TextPart("hi")}}}}
	if _, err := a.Complete(ctx(t), req); llmclient.ClassOf(err) != failure.RateLimited {
		t.Fatalf("replica a: %v, want the upstream's 429", err)
	}
	start := time.Now()
	if _, err := b.Complete(ctx(t), req); err != nil {
		t.Fatalf("replica b: %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.calls) != 2 {
		t.Fatalf("%d calls upstream, want 2", len(p.calls))
	}
	// b's call reaches the upstream only once the pause a's 429 set has ended.
	if waited := p.calls[1].Sub(p.calls[0]); waited < retryAfter-50*time.Millisecond {
		t.Fatalf("replica b called %v after the 429, within its Retry-After %v", waited, retryAfter)
	}
	t.Logf("replica b waited %v for the key's pause", time.Since(start))
}
