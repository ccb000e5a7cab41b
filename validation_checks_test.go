package llmclient_test

import (
	"context"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every WithObserver given receives every event.
func TestEveryObserverObserves(t *testing.T) {
	var first, second eventLog
	c := newClient(t, up("a", fake.New(fake.Reply("ok").Forever())), llmclient.WithObserver(first.observe),
		llmclient.WithObserver(nil), llmclient.WithObserver(second.observe))
	_, err := c.Complete(context.Background(), chatReq("m"))
	require.NoError(t, err)
	assert.Len(t, first.kinds(event.Call), 1)
	assert.Len(t, second.kinds(event.Call), 1)
}

func TestModelGroupDeclaredTwiceIsRefused(t *testing.T) {
	_, err := llmclient.New(up("a", fake.New()), up("b", fake.New()),
		llmclient.WithModelGroup("chat", "a"), llmclient.WithModelGroup("chat", "b"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `model group "chat" is declared more than once`)
}

// A group none of whose upstreams maps its name could never serve a call: New refuses it,
// and so does Update.
func TestModelGroupNobodyServesIsRefused(t *testing.T) {
	mapped := func(name string, models map[string]string) llmclient.Option {
		return llmclient.WithUpstream(llmclient.Upstream{Name: name, Provider: fake.New(fake.Reply("ok").Forever()), Models: models})
	}
	_, err := llmclient.New(mapped("a", map[string]string{"gpt-4o": "gpt-4o"}), mapped("b", map[string]string{"sonnet": "sonnet"}),
		llmclient.WithModelGroup("chat", "a", "b"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `model group "chat": none of its upstreams serves model "chat"`)

	c := newClient(t, mapped("a", map[string]string{"chat": "gpt-4o"}), mapped("b", map[string]string{"sonnet": "sonnet"}),
		llmclient.WithModelGroup("chat", "a", "b"))
	err = c.Update(llmclient.SetGroup("chat", "b"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "none of its upstreams serves")
	require.NoError(t, c.Update(llmclient.SetGroup("chat", "b", "a")))
}

// A typo in CallOptions.Pin is named as such, not as a model nobody serves.
func TestPinTypoIsNamed(t *testing.T) {
	c := newClient(t, up("a", fake.New(fake.Reply("ok").Forever())), up("b", fake.New(fake.Reply("ok").Forever())),
		llmclient.WithModelGroup("chat", "a", "b"))
	ctx := llmclient.WithCallOptions(context.Background(), llmclient.CallOptions{Pin: []string{"bb"}})
	_, err := c.Complete(ctx, chatReq("chat"))
	require.ErrorIs(t, err, llmclient.ErrNoUpstream)
	assert.Contains(t, err.Error(), `CallOptions.Pin names no upstream of the client: "bb"`)
	assert.NotContains(t, err.Error(), "no upstream serves model")

	ctx = llmclient.WithCallOptions(context.Background(), llmclient.CallOptions{Exclude: []string{"a", "b"}})
	_, err = c.Complete(ctx, chatReq("chat"))
	require.ErrorIs(t, err, llmclient.ErrNoUpstream)
	assert.Contains(t, err.Error(), "CallOptions.Exclude leaves no upstream")
}

// Event.Model is what the upstream was sent, on attempts and on the call alike;
// RequestedModel is the caller's name.
func TestEventModelIsWhatTheUpstreamWasSent(t *testing.T) {
	var log eventLog
	c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Fail(500).Forever()),
		Models: map[string]string{"chat": "gpt-4o-mini"}}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: fake.New(fake.Reply("ok").Forever()),
			Models: map[string]string{"chat": "claude-haiku"}}),
		llmclient.WithModelGroup("chat", "a", "b"), llmclient.WithObserver(log.observe), llmclient.WithMaxAttempts(1))
	_, err := c.Complete(context.Background(), chatReq("chat"))
	require.NoError(t, err)
	var got []string
	for _, k := range []event.Kind{event.Attempt, event.Failover, event.Call} {
		for _, e := range log.kinds(k) {
			got = append(got, k.String()+" "+e.Model+" "+e.RequestedModel)
		}
	}
	assert.Equal(t, []string{"attempt gpt-4o-mini chat", "attempt claude-haiku chat", "failover gpt-4o-mini chat",
		"call claude-haiku chat"}, got)
}
