package llmclient_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient"
)

// The repeat window starts at the failure: resends inside it do not extend it, so a job
// queue that resubmits a failed request every minute reaches the upstream again.
func TestTransportRepeatWindowIsNotExtendedByResends(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(status(503, err503))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithMaxAttempts(1))
		rt := c.Transport(memTransport{up}, llmclient.WithRepeatWindow(time.Minute))
		send := func() {
			resp, err := post(t, context.Background(), rt, chatURL, chatBody)
			require.NoError(t, err)
			_, _ = readBody(t, resp)
			assert.Equal(t, 503, resp.StatusCode)
		}
		send()
		require.Equal(t, 1, up.count())
		time.Sleep(40 * time.Second)
		send()
		assert.Equal(t, 1, up.count(), "inside the window: answered from the failure")
		time.Sleep(30 * time.Second) // 70s after the failure, 30s after the resend
		send()
		assert.Equal(t, 2, up.count(), "the window ended a minute after the failure")
	})
}

// One failure answers a bounded number of repeats; the next one is sent as a new call.
func TestTransportRepeatReplaysAreCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(status(503, err503))
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithMaxAttempts(1))
		rt := c.Transport(memTransport{up}, llmclient.WithRepeatWindow(time.Hour))
		for range 20 {
			resp, err := post(t, context.Background(), rt, chatURL, chatBody)
			require.NoError(t, err)
			_, _ = readBody(t, resp)
			time.Sleep(time.Second)
		}
		assert.Equal(t, 2, up.count(), "a failure answers at most 10 repeats: the 12th try is a new call")
	})
}
