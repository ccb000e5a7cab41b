package redisstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/ratelimit"
)

// Claims of docs/replicas.md and docs/limits.md about replicas sharing a redis-server.
// The limits refill over tens of seconds, so the test's own time refills nothing.

func auditReq() *llmclient.Request {
	return &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("hi")}}
}

func auditClient(t *testing.T, opts ...llmclient.Option) *llmclient.Client {
	t.Helper()
	c, err := llmclient.New(append(opts, llmclient.WithLimiterMode(ratelimit.FailFast))...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAuditQuotaScopeAcrossReplicas: "In a store a scope is the state quota:<Name>,
// shared by every replica": two replicas whose upstreams (with keys of their own and no
// key limits) name one scope admit its burst once in total.
func TestAuditQuotaScopeAcrossReplicas(t *testing.T) {
	srv := startRedis(t)
	scope := llmclient.WithQuotaScope(llmclient.QuotaScope{Name: "proj", Limits: llmclient.Limits{RPM: 2, RequestBurst: 2}})
	replica := func(key string) *llmclient.Client {
		return auditClient(t, llmclient.WithLimitStore(srv.store()), scope,
			llmclient.WithUpstream(llmclient.Upstream{Name: "gem", Provider: fake.New(fake.Reply("ok").Forever()),
				Keys: []string{key}, QuotaScopes: []string{"proj"}}))
	}
	a, b := replica("key-a"), replica("key-b")
	served := 0
	for _, c := range []*llmclient.Client{a, b, a, b} {
		_, err := c.Complete(context.Background(), auditReq())
		switch {
		case err == nil:
			served++
		case !errors.Is(err, llmclient.ErrRateLimited):
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if served != 2 {
		t.Errorf("%d calls served across two replicas under a scope of burst 2, want 2", served)
	}
}

// TestAuditKeyStateIsNamedByTheKey: "a key's state is named by the upstream and a
// fingerprint of the key (never the key), so the order of Keys does not matter": a key
// that replica A spent is spent for replica B too, where it has another label.
func TestAuditKeyStateIsNamedByTheKey(t *testing.T) {
	srv := startRedis(t)
	limits := llmclient.Limits{RPM: 1, RequestBurst: 1}
	pa := fake.New(fake.Reply("ok").Forever())
	a := auditClient(t, llmclient.WithLimitStore(srv.store()),
		llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: pa, Keys: []string{"sk-one"}, Limits: limits}))
	pb := fake.New(fake.Reply("ok").Forever())
	b := auditClient(t, llmclient.WithLimitStore(srv.store()),
		llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: pb, Keys: []string{"sk-two", "sk-one"}, Limits: limits}))
	if _, err := a.Complete(context.Background(), auditReq()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Complete(context.Background(), auditReq()); err != nil {
		t.Fatalf("b's first call: %v", err)
	}
	if _, err := b.Complete(context.Background(), auditReq()); !errors.Is(err, llmclient.ErrRateLimited) {
		t.Errorf("b's second call: %v, want ErrRateLimited (both keys spent)", err)
	}
	for _, r := range pb.Requests() {
		if r.APIKey != "sk-two" {
			t.Errorf("b called with %q, which a had spent", r.APIKey)
		}
	}
}

// TestAuditUpdateLowersEveryReplica: "with a shared store every replica enforces the new
// limits at once": replica A lowers the shared key's limits with Update; replica B, whose
// own configuration still says 600 RPM, is held to the new limit from its next call.
func TestAuditUpdateLowersEveryReplica(t *testing.T) {
	srv := startRedis(t)
	replica := func() *llmclient.Client {
		return auditClient(t, llmclient.WithLimitStore(srv.store()),
			llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: fake.New(fake.Reply("ok").Forever()),
				Keys: []string{"sk-shared"}, Limits: llmclient.Limits{RPM: 600}}))
	}
	a, b := replica(), replica()
	for _, c := range []*llmclient.Client{a, b} {
		if _, err := c.Complete(context.Background(), auditReq()); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Update(llmclient.SetLimits("u", llmclient.Limits{RPM: 1, RequestBurst: 1})); err != nil {
		t.Fatal(err)
	}
	served := 0
	for range 5 {
		if _, err := b.Complete(context.Background(), auditReq()); err == nil {
			served++
		} else if !errors.Is(err, llmclient.ErrRateLimited) {
			t.Fatal(err)
		}
	}
	if served > 1 {
		t.Errorf("b served %d calls after a set RPM 1, burst 1 on the shared key; want at most 1", served)
	}
}
