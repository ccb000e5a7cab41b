package llmclient_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/openai"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Azure OpenAI names the model by the deployment in the path (the body has none): a model
// group of two Azure resources sends each attempt to that upstream's own deployment, the
// failover included.
func TestTransportModelGroupRenamesAzureDeployment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		east := newScript(status(503, err503))
		west := newScript(ok(chatOK))
		pe, err := openai.New(openai.WithAzure("http://east.test", "2024-10-21"), openai.WithAPIKey("k-east"))
		require.NoError(t, err)
		pw, err := openai.New(openai.WithAzure("http://west.test", "2024-10-21"), openai.WithAPIKey("k-west"))
		require.NoError(t, err)
		c := newClient(t,
			llmclient.WithUpstream(llmclient.Upstream{Name: "east", Provider: pe, Models: map[string]string{"chat": "gpt4o-east"}}),
			llmclient.WithUpstream(llmclient.Upstream{Name: "west", Provider: pw, Models: map[string]string{"chat": "gpt4o-west"}}),
			llmclient.WithModelGroup("chat", "east", "west"), llmclient.WithMaxAttempts(1))
		rt := c.Transport(memTransport{hostMux{"east.test": east, "west.test": west}})
		resp, err := post(t, context.Background(), rt, "http://east.test/openai/deployments/chat/chat/completions?api-version=2024-10-21",
			`{"messages":[{"role":"user","content":"Say hello, in one word."}]}`)
		require.NoError(t, err)
		body, _ := readBody(t, resp)
		require.Equal(t, 200, resp.StatusCode, body)
		got := east.requests()
		require.Len(t, got, 1)
		assert.Equal(t, "/openai/deployments/gpt4o-east/chat/completions", got[0].Path)
		got = west.requests()
		require.Len(t, got, 1)
		assert.Equal(t, "/openai/deployments/gpt4o-west/chat/completions", got[0].Path)
		assert.Equal(t, "api-version=2024-10-21", got[0].Query)
		assert.Equal(t, "k-west", got[0].Header.Get("Api-Key"))
	})
}
