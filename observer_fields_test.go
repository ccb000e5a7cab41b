package llmclient_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Attempt events place each attempt on a timeline (Start, Time), say how long it waited
// in the limiter and whether it retried; a stream's call event counts its time to first
// token from the call's start.
func TestEventTimeline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("one").Latency(time.Second), fake.Fail(503).Latency(time.Second),
			fake.Reply("two").Latency(time.Second), fake.Fail(503), fake.Stream("a", "b").StallFirst(2*time.Second))
		var log eventLog
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p,
			Limits: llmclient.Limits{RPM: 6}}), // a bucket of one request, refilled every 10s
			llmclient.WithBackoff(3*time.Second, 3*time.Second), llmclient.WithObserver(log.observe))
		t0 := time.Now()
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		t1 := time.Now()
		_, err = c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)

		at := log.kinds(event.Attempt)
		require.Len(t, at, 3)
		assert.Equal(t, t0, at[0].Start)
		assert.Equal(t, t0.Add(time.Second), at[0].Time)
		assert.Zero(t, at[0].LimiterWait)
		assert.False(t, at[0].Retry)

		// The second call waits 9s for the bucket (10s after the first admission), fails
		// after 1s, backs off 3s ±50%, waits in the limiter for what is left of the next
		// 10s (nothing: the failed attempt gave its request back), and succeeds after 1s.
		assert.Equal(t, t1, at[1].Start, "the attempt begins with the call; its limiter wait is inside it")
		assert.Equal(t, 9*time.Second, at[1].LimiterWait)
		assert.Equal(t, 9*time.Second, at[1].Waited)
		assert.Equal(t, t1.Add(10*time.Second), at[1].Time)
		assert.False(t, at[1].Retry)
		assert.True(t, at[2].Retry)
		backoff := at[2].Waited - at[2].LimiterWait
		assert.InDelta(t, float64(3*time.Second), float64(backoff), float64(1500*time.Millisecond))
		assert.Equal(t, at[1].Time.Add(backoff), at[2].Start, "the attempt begins after the backoff")
		assert.Zero(t, at[2].LimiterWait, "the failed attempt's request was given back to the bucket")
		assert.Equal(t, at[2].Start.Add(at[2].LimiterWait+time.Second), at[2].Time)

		calls := log.kinds(event.Call)
		require.Len(t, calls, 2)
		assert.Equal(t, t1, calls[1].Start)
		assert.Equal(t, at[2].Time, calls[1].Time)
		assert.Equal(t, calls[1].Time.Sub(calls[1].Start), calls[1].Latency)

		// A stream that retries before its first token: the caller waited for both.
		time.Sleep(time.Minute) // a full bucket
		t2 := time.Now()
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		for s.Next() {
		}
		require.NoError(t, s.Err())
		at = log.kinds(event.Attempt)
		require.Len(t, at, 5)
		streamed := at[4]
		assert.Equal(t, 2*time.Second, streamed.TimeToFirstToken, "the attempt's own time to first token")
		calls = log.kinds(event.Call)
		require.Len(t, calls, 3)
		assert.Equal(t, streamed.Start.Add(streamed.LimiterWait+2*time.Second).Sub(t2), calls[2].TimeToFirstToken,
			"the call's: from its start, the failed attempt, backoff and limiter wait included")
		assert.Greater(t, calls[2].TimeToFirstToken, 3*time.Second)
	})
}
