package llmclient_test

import (
	"context"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A call refused as a bad request before it reaches an upstream (no messages) is a call
// the observer hears of (event.Call, class bad_request), one-shot and streaming: a
// dashboard of calls by class would otherwise miss a caller's broken requests.
func TestCallsRefusedAsBadRequestsAreObserved(t *testing.T) {
	var log eventLog
	p := fake.New(fake.Reply("ok").Forever())
	c := newClient(t, up("a", p), llmclient.WithObserver(log.observe))
	empty := &llmclient.Request{Model: "m"}
	_, err := c.Complete(context.Background(), empty)
	require.Equal(t, failure.BadRequest, llmclient.ClassOf(err))
	_, err = c.Stream(context.Background(), empty)
	require.Equal(t, failure.BadRequest, llmclient.ClassOf(err))
	calls := log.kinds(event.Call)
	require.Len(t, calls, 2, "Complete and Stream")
	for _, e := range calls {
		assert.Equal(t, failure.BadRequest, e.Class)
		assert.NotZero(t, e.CallID)
		assert.Equal(t, "m", e.Model)
	}
	assert.Zero(t, p.Calls(), "nothing reached the upstream")
}
