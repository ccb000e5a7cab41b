package llmclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/ratelimit"
)

// scopePair is a Client whose upstreams a (key k1, answering with the request window
// reported) and b (key k2, no headers) share the quota scope proj of the given RPM.
func scopePair(t *testing.T, rpm int, reported ratelimit.Window) (c *llmclient.Client, pa, pb *fake.Provider) {
	pa = fake.New(fake.Reply("ok").RateLimits(ratelimit.Status{Requests: reported}).Forever())
	pb = fake.New(fake.Reply("ok").Forever())
	c = newClient(t,
		llmclient.WithQuotaScope(llmclient.QuotaScope{Name: "proj", Limits: llmclient.Limits{RPM: rpm}}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: pa, Keys: []string{"k1"}, QuotaScopes: []string{"proj"}}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: pb, Keys: []string{"k2"}, QuotaScopes: []string{"proj"}}),
		llmclient.WithLimiterMode(ratelimit.FailFast))
	return c, pa, pb
}

func pinTo(u string) context.Context {
	return llmclient.WithCallOptions(context.Background(), llmclient.CallOptions{Pin: []string{u}, NoFailover: true})
}

// A key reporting its own window, smaller than the scope's declared limit, limits that
// key only: the scope shared with another upstream keeps its rate, and a call that fails
// over from the key to the other upstream is admitted there.
func TestScopeIgnoresAKeysSmallerWindow(t *testing.T) {
	c, _, _ := scopePair(t, 6000, ratelimit.Window{Known: true, Limit: 60, Remaining: 0, Reset: time.Minute})
	if _, err := c.Complete(pinTo("a"), chatReq("m")); err != nil {
		t.Fatal(err)
	}
	n := 0
	for range 100 {
		if _, err := c.Complete(pinTo("b"), chatReq("m")); err == nil {
			n++
		}
	}
	if n < 100 {
		t.Errorf("b admitted %d of 100 (scope RPM 6000, burst 1000) after key k1 reported its own 60/min window spent", n)
	}
	if _, err := c.Complete(context.Background(), chatReq("m")); err != nil {
		t.Errorf("unpinned call (a's key spent, b free): %v", err)
	}
}

// A window of the scope's declared size is the scope's own (a vendor reporting the quota
// the scope stands for on each key): it empties the scope for every upstream sharing it.
func TestScopeLearnsAWindowOfItsSize(t *testing.T) {
	c, _, pb := scopePair(t, 60, ratelimit.Window{Known: true, Limit: 60, Remaining: 0, Reset: time.Minute})
	if _, err := c.Complete(pinTo("a"), chatReq("m")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Complete(pinTo("b"), chatReq("m")); err == nil {
		t.Errorf("b admitted after the scope's 60/min window was reported spent")
	}
	if pb.Calls() != 0 {
		t.Errorf("b called %d times", pb.Calls())
	}
}
