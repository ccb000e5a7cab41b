package llmclient_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/failure"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewValidatesEveryOption(t *testing.T) {
	p := fake.New()
	_, err := llmclient.New()
	assert.ErrorContains(t, err, "no upstream")

	_, err = llmclient.New(
		llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "", Provider: p}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "noprov"}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "k", Provider: p, Keys: []string{"sk-1", ""}}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "lim", Provider: p, Limits: llmclient.Limits{RPM: -1}}),
		llmclient.WithModelGroup("g", "a", "missing"),
		llmclient.WithContextFallback("nowhere"),
		llmclient.WithMaxAttempts(0),
		llmclient.WithBackoff(time.Second, time.Millisecond),
		llmclient.WithRetryBudget(-1, 0, time.Second),
		llmclient.WithFirstTokenTimeout(-time.Second),
		llmclient.WithKeyCooldown(0),
		llmclient.WithBreaker(breaker.Config{FailureRatio: 2}),
	)
	require.Error(t, err)
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, "llmclient: invalid options: "), msg)
	for _, want := range []string{
		`upstream "a" registered twice`, "upstream 2 has no Name", `upstream "noprov" has no Provider`,
		`key#2 is empty`, `upstream "lim"`, `unknown upstream "missing"`, `unknown upstream "nowhere"`,
		"max attempts", "backoff", "retry budget", "stream timeouts", "key cooldown", "breaker",
	} {
		assert.Contains(t, msg, want)
	}
	assert.NotContains(t, msg, "sk-1", "keys never appear in errors")
}

func TestModelMappingAndGroups(t *testing.T) {
	a := fake.New(fake.Reply("a").Forever())
	b := fake.New(fake.Reply("b").Forever())
	c := newClient(t,
		llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: a, Models: map[string]string{"chat": "gpt-4o-mini"}}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: b}),
	)
	resp, err := c.Complete(context.Background(), chatReq("chat"))
	require.NoError(t, err)
	assert.Equal(t, "a", resp.Upstream)
	assert.Equal(t, "gpt-4o-mini", a.Requests()[0].Model, "the upstream's own model name is sent")

	resp, err = c.Complete(context.Background(), chatReq("other"))
	require.NoError(t, err)
	assert.Equal(t, "b", resp.Upstream, "a only serves the models it maps")
	assert.Equal(t, "other", b.Requests()[0].Model)

	c = newClient(t, up("a", a), up("b", b), llmclient.WithModelGroup("chat", "b", "a"))
	resp, err = c.Complete(context.Background(), chatReq("chat"))
	require.NoError(t, err)
	assert.Equal(t, "b", resp.Upstream, "a group's order wins")

	_, err = newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: a,
		Models: map[string]string{"x": "y"}})).Complete(context.Background(), chatReq("unknown"))
	assert.ErrorIs(t, err, llmclient.ErrNoUpstream)
}

func TestRequestValidation(t *testing.T) {
	c := newClient(t, up("a", fake.New()))
	_, err := c.Complete(context.Background(), nil)
	assert.Equal(t, failure.BadRequest, llmclient.ClassOf(err))
	_, err = c.Complete(context.Background(), &llmclient.Request{Model: "m"})
	assert.Equal(t, failure.BadRequest, llmclient.ClassOf(err))
	_, err = c.Stream(context.Background(), nil)
	assert.Equal(t, failure.BadRequest, llmclient.ClassOf(err))
}

func TestMiddlewareOrder(t *testing.T) {
	var order []string
	mw := func(name string) llmclient.Middleware {
		return func(next llmclient.Handler) llmclient.Handler {
			return llmclient.HandlerFuncs{
				CompleteFunc: func(ctx context.Context, req *llmclient.Request) (*llmclient.Response, error) {
					order = append(order, name+" in")
					resp, err := next.Complete(ctx, req)
					order = append(order, name+" out")
					return resp, err
				},
				StreamFunc: next.Stream,
			}
		}
	}
	p := fake.New(fake.Reply("ok"), fake.Stream("s"))
	c := newClient(t, up("a", p), llmclient.WithMiddleware(mw("outer")), llmclient.WithMiddleware(mw("inner")))
	_, err := c.Complete(context.Background(), chatReq("m"))
	require.NoError(t, err)
	assert.Equal(t, []string{"outer in", "inner in", "inner out", "outer out"}, order)
	s, err := c.Stream(context.Background(), chatReq("m"))
	require.NoError(t, err)
	s.Close()
}
