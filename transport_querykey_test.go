package llmclient_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/gemini"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With a key pool, an attempt carries the pool's key in place of the caller's: also when
// the caller put its key in the URL (Gemini's ?key=), which went out next to the pool's
// header, so the upstream saw two keys and could bill and limit the caller's.
func TestTransportPoolKeyReplacesAQueryKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const gemOK = `{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1}}`
		gem := newScript(ok(gemOK))
		pg, err := gemini.New(gemini.WithBaseURL("http://gem.test"))
		require.NoError(t, err)
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "gem", Provider: pg, Keys: []string{poolKey}}))
		url := "http://gem.test/v1beta/models/gemini-2.5-flash:generateContent?key=" + callerKey + "&trace=1"
		resp, err := post(t, context.Background(), c.Transport(memTransport{hostMux{"gem.test": gem}}), url,
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
		require.NoError(t, err)
		_, _ = readBody(t, resp)
		require.Equal(t, 1, gem.count())
		got := gem.requests()[0]
		assert.Equal(t, poolKey, got.Header.Get("X-Goog-Api-Key"))
		assert.NotContains(t, got.Query, callerKey, "the caller's key stays behind")
		assert.Contains(t, got.Query, "trace=1", "the other parameters go along")
		assert.Equal(t, "key="+callerKey+"&trace=1", resp.Request.URL.RawQuery, "the caller's request is not modified")
	})
}
