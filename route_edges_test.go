package llmclient_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/routing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// event.Failover names the upstream the call really moves to: when a hedge already used up
// the next upstream's attempts, the failover passes over it, and so does the event.
func TestFailoverEventNamesTheUpstreamMovedTo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Fail(500).Latency(1500 * time.Millisecond).Forever())
		b := fake.New(fake.Fail(500).Latency(100 * time.Millisecond).Forever())
		cUp := fake.New(fake.Reply("ok").Forever())
		var log eventLog
		c := newClient(t, up("a", a), up("b", b), up("c", cUp), hedging(time.Second),
			llmclient.WithMaxAttempts(1), llmclient.WithObserver(log.observe))
		resp, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		assert.Equal(t, "c", resp.Upstream)
		assert.Equal(t, 1, b.Calls(), "b's one attempt was the hedge")
		var targets []string
		for _, e := range log.kinds(event.Failover) {
			targets = append(targets, e.Upstream+"→"+e.Target)
		}
		assert.Equal(t, []string{"a→c"}, targets)
		assertNothingHeld(t, c)
	})
}

// A failover event is emitted only when the call moves: with the rest of the route out
// of attempts, the call ends without one.
func TestNoFailoverEventWhenNothingIsLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Fail(500).Latency(1500 * time.Millisecond).Forever())
		b := fake.New(fake.Fail(500).Latency(100 * time.Millisecond).Forever())
		var log eventLog
		c := newClient(t, up("a", a), up("b", b), hedging(time.Second),
			llmclient.WithMaxAttempts(1), llmclient.WithObserver(log.observe))
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.Error(t, err)
		assert.Empty(t, log.kinds(event.Failover))
		assertNothingHeld(t, c)
	})
}

// Latency routing asked for only in a call's options, on a Client configured without it,
// still learns latencies and explores: every 200th recorded latency the call goes to
// another upstream.
func TestPerCallLatencyRoutingExplores(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Reply("a").Latency(10 * time.Millisecond).Forever())
		b := fake.New(fake.Reply("b").Latency(10 * time.Millisecond).Forever())
		c := newClient(t, up("a", a), up("b", b))
		ctx := llmclient.WithCallOptions(context.Background(), llmclient.CallOptions{Routing: routing.Latency})
		for range 450 {
			_, err := c.Complete(ctx, chatReq("m"))
			require.NoError(t, err)
		}
		assert.GreaterOrEqual(t, b.Calls(), 1, "latency routing explored the other upstream")
		assertNothingHeld(t, c)
	})
}
