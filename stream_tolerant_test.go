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
	"github.com/llmclient/llmclient/provider/openai"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A malformed event in an otherwise healthy stream (a proxy rewrote it) is skipped: the
// stream completes where it is, and the attempt's notes count what was skipped.
func TestStreamSkipsAMalformedEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bad := `data: {"id":"s1","object":"chat.completion.chunk","choices":[{"delta":{"content":` + "\n\n"
		srv := newScript(sseStep(ev{0, roleChunk}, ev{0, chunk("Hel")}, ev{0, bad}, ev{0, chunk("lo")}, ev{0, stopChunk}, ev{0, done}))
		p, err := openai.New(openai.WithBaseURL("http://oai.test/v1"), openai.WithHTTPClient(&http.Client{Transport: memTransport{h: srv}}))
		require.NoError(t, err)
		var log eventLog
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "oai", Provider: p}), llmclient.WithObserver(log.observe))
		s, err := c.Stream(context.Background(), chatReq("gpt-4o"))
		require.NoError(t, err)
		defer s.Close()
		text, err := readAll(s)
		require.NoError(t, err)
		assert.Equal(t, "Hello", text)
		assert.Equal(t, 1, srv.count(), "recovered in place")
		at := log.kinds(event.Attempt)
		require.Len(t, at, 1)
		assert.Equal(t, failure.None, at[0].Class)
		require.Len(t, s.Response().Attempts, 1)
		assert.True(t, strings.Contains(strings.Join(s.Response().Attempts[0].Notes, ";"), "skipped 1 malformed stream events"))
	})
}
