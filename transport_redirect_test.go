package llmclient_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// antAt registers an Anthropic upstream at baseURL with its provider's own key.
func antAt(t *testing.T, name, baseURL, key string) llmclient.Option {
	t.Helper()
	p, err := anthropic.New(anthropic.WithBaseURL(baseURL), anthropic.WithAPIKey(key))
	require.NoError(t, err)
	return llmclient.WithUpstream(llmclient.Upstream{Name: name, Provider: p})
}

const (
	antBody = `{"model":"claude-x","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	antOK   = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`
)

// A failover target that answers with a redirect: the caller's http.Client would follow
// it with the caller's headers, and it strips only Authorization and cookies on another
// host, so the caller's credential for its own upstream (an X-Api-Key) would go to the
// failover target's host, or wherever its Location points: the credentials the transport
// keeps behind on failover. Such an answer is the target's failure (failure.Unavailable: the
// call fails over on, or fails), never handed to the caller to follow. A redirect from
// the upstream the caller addressed is still the caller's to follow.
func TestTransportFailoverRedirectIsNotFollowedWithTheCallersKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const antOverloaded = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
		redirect := func(to string) func(http.ResponseWriter, *http.Request) {
			return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, http.StatusTemporaryRedirect) }
		}
		for _, to := range []string{"http://b.test/v1/messages?region=eu", "http://evil.test/v1/messages"} {
			a := newScript(status(529, antOverloaded))
			b := newScript(redirect(to), ok(antOK))
			evil := newScript(ok(antOK))
			var log eventLog
			c := newClient(t, antAt(t, "a", "http://a.test", "a-own-key"), antAt(t, "b", "http://b.test", bKey),
				llmclient.WithModelGroup("claude-x", "a", "b"), llmclient.WithMaxAttempts(1), llmclient.WithObserver(log.observe))
			hc := &http.Client{Transport: c.Transport(memTransport{hostMux{"a.test": a, "b.test": b, "evil.test": evil}})}
			req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://a.test/v1/messages",
				strings.NewReader(antBody))
			require.NoError(t, err)
			req.Header.Set("X-Api-Key", callerKey)
			resp, err := hc.Do(req)
			if err == nil {
				_, _ = readBody(t, resp)
			}
			for _, r := range append(b.requests(), evil.requests()...) {
				assert.NotContains(t, r.Header.Get("X-Api-Key"), callerKey, "the caller's key for a never leaves a's host")
			}
			assert.Equal(t, 1, b.count(), "the redirect is not followed")
			assert.Zero(t, evil.count())
			require.Error(t, err)
			at := log.kinds(event.Attempt)
			require.Len(t, at, 2)
			assert.Equal(t, failure.Unavailable, at[1].Class)
			assert.Equal(t, http.StatusTemporaryRedirect, at[1].Status)
		}

		// The caller's own upstream redirecting: the caller's client follows, as without
		// the transport.
		a2 := newScript(redirect("http://a.test/v1/messages?region=eu"), ok(antOK))
		c2 := newClient(t, antAt(t, "a", "http://a.test", "a-own-key"))
		hc2 := &http.Client{Transport: c2.Transport(memTransport{hostMux{"a.test": a2}})}
		req2, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://a.test/v1/messages",
			strings.NewReader(antBody))
		require.NoError(t, err)
		req2.Header.Set("X-Api-Key", callerKey)
		resp2, err := hc2.Do(req2)
		require.NoError(t, err)
		body, _ := readBody(t, resp2)
		assert.JSONEq(t, antOK, body)
		require.Equal(t, 2, a2.count())
		assert.Equal(t, "region=eu", a2.requests()[1].Query)
	})
}
