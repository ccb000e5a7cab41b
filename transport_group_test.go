package llmclient_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/gemini"
	"github.com/llmclient/llmclient/provider/openai"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const groupChatBody = `{"model":"chat","messages":[{"role":"user","content":"Say hello, in one word."}]}`

// A model group whose upstreams map its name (the README's configuration style) works
// through the transport: each upstream gets the request under its own model name.
func TestTransportModelGroupMapsTheModelPerUpstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mini := newScript(status(503, err503))
		ds := newScript(ok(chatOK))
		pmini, err := openai.New(openai.WithBaseURL("http://oai.test/v1"))
		require.NoError(t, err)
		pds, err := openai.New(openai.WithBaseURL("http://ds.test/v1"), openai.WithAPIKey("sk-ds"))
		require.NoError(t, err)
		c := newClient(t,
			llmclient.WithUpstream(llmclient.Upstream{Name: "openai-mini", Provider: pmini, Models: map[string]string{"chat": "gpt-4o-mini"}}),
			llmclient.WithUpstream(llmclient.Upstream{Name: "deepseek", Provider: pds, Models: map[string]string{"chat": "deepseek-chat"}}),
			llmclient.WithModelGroup("chat", "openai-mini", "deepseek"), llmclient.WithMaxAttempts(1))
		rt := c.Transport(memTransport{hostMux{"oai.test": mini, "ds.test": ds}})
		resp, err := post(t, context.Background(), rt, "http://oai.test/v1/chat/completions", groupChatBody)
		require.NoError(t, err)
		body, _ := readBody(t, resp)
		require.Equal(t, 200, resp.StatusCode, body)
		got := mini.requests()
		require.Len(t, got, 1)
		assert.JSONEq(t, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello, in one word."}]}`, got[0].Body)
		got = ds.requests()
		require.Len(t, got, 1)
		assert.JSONEq(t, `{"model":"deepseek-chat","messages":[{"role":"user","content":"Say hello, in one word."}]}`, got[0].Body)
		assert.Equal(t, "/v1/chat/completions", got[0].Path)
	})
}

// The group's healthy upstream serves when it is the one the SDK addressed.
func TestTransportModelGroupSingleUpstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(ok(chatOK))
		p, err := openai.New(openai.WithBaseURL("http://oai.test/v1"))
		require.NoError(t, err)
		c := newClient(t,
			llmclient.WithUpstream(llmclient.Upstream{Name: "openai-mini", Provider: p, Models: map[string]string{"chat": "gpt-4o-mini"}}),
			llmclient.WithModelGroup("chat", "openai-mini"))
		rt := c.Transport(memTransport{up})
		resp, err := post(t, context.Background(), rt, "http://oai.test/v1/chat/completions", groupChatBody)
		require.NoError(t, err)
		body, _ := readBody(t, resp)
		require.Equal(t, 200, resp.StatusCode, body)
		got := up.requests()
		require.Len(t, got, 1)
		assert.JSONEq(t, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello, in one word."}]}`, got[0].Body)
	})
}

// Gemini names the model in the path: the path carries the upstream's name for it.
func TestTransportModelGroupRenamesGeminiPath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := newScript(ok(`{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP"}]}`))
		pg, err := gemini.New(gemini.WithBaseURL("http://gem.test"))
		require.NoError(t, err)
		c := newClient(t,
			llmclient.WithUpstream(llmclient.Upstream{Name: "gem", Provider: pg, Models: map[string]string{"chat": "gemini-2.5-flash"}}),
			llmclient.WithModelGroup("chat", "gem"))
		rt := c.Transport(memTransport{up})
		body := `{"contents":[{"role":"user","parts":[{"text":"Hi"}]}]}`
		resp, err := post(t, context.Background(), rt, "http://gem.test/v1beta/models/chat:generateContent", body)
		require.NoError(t, err)
		_, _ = readBody(t, resp)
		require.Equal(t, 200, resp.StatusCode)
		got := up.requests()
		require.Len(t, got, 1)
		assert.Equal(t, "/v1beta/models/gemini-2.5-flash:generateContent", got[0].Path)
		assert.Equal(t, body, got[0].Body)
	})
}
