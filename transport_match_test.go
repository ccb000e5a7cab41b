package llmclient_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
)

// An SDK whose base URL names the upstream's host another way (localhost for 127.0.0.1,
// a default port written out, an IPv6 loopback) or leaves out or adds the /v1 prefix is
// protected all the same: the pool key goes out, not the SDK's.
func TestTransportMatchesEquivalentBaseURLs(t *testing.T) {
	for _, url := range []string{
		"http://localhost:8080/v1/chat/completions",
		"http://LOCALHOST.:8080/v1/chat/completions",
		"http://[::1]:8080/v1/chat/completions",
		"http://127.0.0.1:8080/chat/completions",       // no /v1
		"http://127.0.0.1:8080/v1/v1/chat/completions", // an extra /v1
	} {
		t.Run(url, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := newScript(status(503, err503), ok(chatOK))
				c := newClient(t, oaiUpstream(t, "oai", "http://127.0.0.1:8080/v1", "sk-pool"), llmclient.WithMaxAttempts(2))
				rt := c.Transport(memTransport{up})
				resp, err := post(t, context.Background(), rt, url, chatBody, "Authorization", "Bearer sk-caller")
				require.NoError(t, err)
				_, _ = readBody(t, resp)
				assert.Equal(t, 200, resp.StatusCode, "retried: protected")
				got := up.requests()
				require.Len(t, got, 2)
				assert.Equal(t, "Bearer sk-pool", got[0].Header.Get("Authorization"), "the pool key, never the SDK's")
				assert.Zero(t, rt.Unmatched())
			})
		})
	}
}

// A request that matches no upstream is counted and reported once per host; in strict
// mode it is refused without being sent.
func TestTransportUnmatchedRequestsAreReportedAndStrictRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(ok(chatOK))
		var log eventLog
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithObserver(log.observe))
		rt := c.Transport(memTransport{up})
		for range 3 {
			resp, err := post(t, context.Background(), rt, "http://other.test/v1/chat/completions", chatBody, "Authorization", "Bearer sk-caller")
			require.NoError(t, err)
			_, _ = readBody(t, resp)
		}
		assert.Equal(t, uint64(3), rt.Unmatched())
		alerts := log.kinds(event.Alert)
		require.Len(t, alerts, 1, "reported once per host")
		assert.Equal(t, "transport_unmatched", alerts[0].Action)
		assert.Equal(t, "http://other.test", alerts[0].Target)
		assert.NotContains(t, alerts[0].Err.Error(), "sk-caller")

		strict := c.Transport(memTransport{up}, llmclient.WithStrictMatch(true))
		resp, err := post(t, context.Background(), strict, "http://other.test/v1/chat/completions", chatBody)
		assert.Nil(t, resp)
		require.ErrorIs(t, err, llmclient.ErrNoUpstream)
		assert.Equal(t, failure.Unavailable, llmclient.ClassOf(err))
		assert.Equal(t, 3, up.count(), "a refused request is not sent")
		assert.Equal(t, uint64(1), strict.Unmatched())
	})
}

var _ http.RoundTripper = (*llmclient.Transport)(nil)
