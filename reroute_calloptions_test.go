package llmclient_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A budget at its cap reroutes a call to its economy group only where the call's options
// allow: Pin and Exclude narrow the route and never add to it, and NoFailover keeps the
// call where it began. Each of them here rules the economy upstream out: the call is
// refused at the cap and the economy upstream is never called.
func TestBudgetRerouteFollowsTheCallOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    llmclient.CallOptions
	}{
		{"Exclude", llmclient.CallOptions{Exclude: []string{"small"}}},
		{"Pin", llmclient.CallOptions{Pin: []string{"big"}}},
		{"NoFailover", llmclient.CallOptions{NoFailover: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flagship := priced(t, "big", 10*pricing.Dollar, 40*pricing.Dollar, 0)
			economy := priced(t, "small", pricing.Dollar/10, pricing.Dollar/10*4, 0)
			big := fake.New(exactUsage().Forever())
			small := fake.New(exactUsage().Forever())
			perBig := costOf(t, flagship, pricing.Tokens{Input: llmclient.EstimatePromptTokens(nil, budgetReq()), Output: 250}, time.Now())
			c := newClient(t, pricedUp("big", big, flagship), pricedUp("small", small, economy),
				llmclient.WithModelGroup("m", "big"), llmclient.WithModelGroup("economy", "small"),
				llmclient.WithBudget(budget.Budget{Name: "flagship", Cap: perBig, Reroute: "economy"}))
			_, err := c.Complete(context.Background(), budgetReq())
			require.NoError(t, err)
			_, err = c.Complete(llmclient.WithCallOptions(context.Background(), tc.o), budgetReq())
			assert.Equal(t, failure.BudgetExceeded, llmclient.ClassOf(err), "%v", err)
			assert.Zero(t, small.Calls(), "the economy upstream the options rule out was called")
		})
	}
	t.Run("allowed", func(t *testing.T) {
		flagship := priced(t, "big", 10*pricing.Dollar, 40*pricing.Dollar, 0)
		economy := priced(t, "small", pricing.Dollar/10, pricing.Dollar/10*4, 0)
		big, small := fake.New(exactUsage().Forever()), fake.New(exactUsage().Forever())
		perBig := costOf(t, flagship, pricing.Tokens{Input: llmclient.EstimatePromptTokens(nil, budgetReq()), Output: 250}, time.Now())
		c := newClient(t, pricedUp("big", big, flagship), pricedUp("small", small, economy),
			llmclient.WithModelGroup("m", "big"), llmclient.WithModelGroup("economy", "small"),
			llmclient.WithBudget(budget.Budget{Name: "flagship", Cap: perBig, Reroute: "economy"}))
		_, err := c.Complete(context.Background(), budgetReq())
		require.NoError(t, err)
		resp, err := c.Complete(llmclient.WithCallOptions(context.Background(), llmclient.CallOptions{Pin: []string{"big", "small"}}), budgetReq())
		require.NoError(t, err)
		assert.Equal(t, "small", resp.Upstream, "a Pin that names the economy upstream lets the reroute go there")
	})
}

// A prompt too long for its model's window moves to WithContextFallback's upstreams only
// where the call's options allow.
func TestContextFallbackFollowsTheCallOptions(t *testing.T) {
	small := priced(t, "small", pricing.Dollar, pricing.Dollar, 1000)
	large := priced(t, "large", 10*pricing.Dollar, 10*pricing.Dollar, 1_000_000)
	a := fake.New(fake.Reply("ok").Usage(10, 10).Forever())
	b := fake.New(fake.Reply("ok").Usage(10, 10).Forever())
	c := newClient(t, pricedUp("a", a, small), pricedUp("big", b, large), llmclient.WithModelGroup("m", "a"),
		llmclient.WithContextFallback("big"))
	req := chatReq("m")
	req.Messages = []llmclient.Message{llmclient.UserMessage(strings.Repeat("word ", 5000))}
	for _, o := range []llmclient.CallOptions{{Exclude: []string{"big"}}, {Pin: []string{"a"}}, {NoFailover: true}} {
		_, err := c.Complete(llmclient.WithCallOptions(context.Background(), o), req)
		assert.Equal(t, failure.ContextLength, llmclient.ClassOf(err), "%+v: %v", o, err)
		assert.Zero(t, b.Calls(), "%+v: the upstream the options rule out was called", o)
	}
	resp, err := c.Complete(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, "big", resp.Upstream, "without the option the fallback serves it")
}
