package llmclient_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/llmclient/llmclient/provider/gemini"
)

// A local refusal is answered in the addressed upstream's own error format.
func TestTransportRefusalSpeaksTheDialect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(ok(`{}`))
		pg, err := gemini.New(gemini.WithBaseURL("http://gem.test"))
		require.NoError(t, err)
		pa, err := anthropic.New(anthropic.WithBaseURL("http://ant.test"))
		require.NoError(t, err)
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "gem", Provider: pg}),
			llmclient.WithUpstream(llmclient.Upstream{Name: "ant", Provider: pa}))
		require.NoError(t, c.ForceBreakerOpen("gem"))
		require.NoError(t, c.ForceBreakerOpen("ant"))
		rt := c.Transport(memTransport{up})

		resp, err := post(t, context.Background(), rt, "http://gem.test/v1beta/models/gemini-2.5-flash:generateContent",
			`{"contents":[{"role":"user","parts":[{"text":"Hi"}]}]}`)
		require.NoError(t, err)
		body, _ := readBody(t, resp)
		assert.Equal(t, 503, resp.StatusCode)
		assert.JSONEq(t, `{"error":{"code":503,"message":"llmclient: unavailable: request refused locally (upstream gem)","status":"UNAVAILABLE"}}`, body)

		resp, err = post(t, context.Background(), rt, "http://ant.test/v1/messages",
			`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"Hi"}]}`)
		require.NoError(t, err)
		body, _ = readBody(t, resp)
		assert.Equal(t, 503, resp.StatusCode)
		assert.JSONEq(t, `{"type":"error","error":{"type":"overloaded_error","message":"llmclient: unavailable: request refused locally (upstream ant)"}}`, body)
		assert.Zero(t, up.count())
	})
}
