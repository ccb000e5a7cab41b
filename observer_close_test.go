package llmclient_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A call that Close refuses is a call the observer hears of (event.Call, class
// unavailable), in every mode: an error rate that counts only calls that reached the
// engine would stay flat while every call fails.
func TestCallsRefusedAfterCloseAreObserved(t *testing.T) {
	var log eventLog
	p := fake.New(fake.Reply("ok").Forever(), fake.Embedding(4).Forever())
	c := newClient(t, up("a", p), oaiUpstream(t, "b", "http://b.test/v1", "kb"), llmclient.WithObserver(log.observe))
	c.Close()
	_, err := c.Complete(context.Background(), chatReq("m"))
	require.ErrorIs(t, err, llmclient.ErrClosed)
	_, err = c.Stream(context.Background(), chatReq("m"))
	require.ErrorIs(t, err, llmclient.ErrClosed)
	rt := c.Transport(memTransport{hostMux{"b.test": http.HandlerFunc(ok(chatOK))}})
	resp, err := post(t, context.Background(), rt, "http://b.test/v1/chat/completions", chatBody)
	if err == nil {
		_, _ = readBody(t, resp)
	}
	calls := log.kinds(event.Call)
	require.Len(t, calls, 3, "Complete, Stream and the Transport's request")
	ids := map[uint64]bool{}
	for _, e := range calls {
		assert.Equal(t, failure.Unavailable, e.Class)
		assert.NotZero(t, e.CallID)
		ids[e.CallID] = true
	}
	assert.Len(t, ids, 3)
}

// Call IDs are unique across Clients: a fallback function that calls a second Client
// makes a call whose ID is not the first Client's.
func TestCallIDsAreUniqueAcrossClients(t *testing.T) {
	var la, lb eventLog
	a := newClient(t, up("a", fake.New(fake.Reply("ok").Forever())), llmclient.WithObserver(la.observe))
	b := newClient(t, up("b", fake.New(fake.Reply("ok").Forever())), llmclient.WithObserver(lb.observe))
	_, err := a.Complete(context.Background(), chatReq("m"))
	require.NoError(t, err)
	_, err = b.Complete(context.Background(), chatReq("m"))
	require.NoError(t, err)
	ca, cb := la.kinds(event.Call), lb.kinds(event.Call)
	require.Len(t, ca, 1)
	require.Len(t, cb, 1)
	assert.NotEqual(t, ca[0].CallID, cb[0].CallID)
}
