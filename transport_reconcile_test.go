package llmclient_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/openai"
	"github.com/llmclient/llmclient/ratelimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A one-shot answer through the transport reconciles the key's token charge with the usage
// its body reports, as Complete does: an answer that used far more than its estimate
// leaves the next request nothing of the minute's tokens.
func TestTransportOneShotUsageReconcilesTheLimiter(t *testing.T) {
	const big = `{"id":"c1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5900,"completion_tokens":50,"total_tokens":5950}}`
	const small = `{"model":"gpt-4o","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`
	for _, tt := range []struct {
		name   string
		answer string
		second int
	}{
		{"usage far above the estimate", big, http.StatusTooManyRequests},
		{"usage as estimated", chatOK, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, err := openai.New(openai.WithBaseURL("http://oai.test/v1"))
				require.NoError(t, err)
				c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "oai", Provider: p,
					Limits: llmclient.Limits{TPM: 6_000}}), llmclient.WithLimiterMode(ratelimit.FailFast))
				rt := c.Transport(memTransport{newScript(ok(tt.answer))})
				resp, err := post(t, context.Background(), rt, "http://oai.test/v1/chat/completions", small)
				require.NoError(t, err)
				_, err = readBody(t, resp)
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, resp.StatusCode)
				// The clock stands still: nothing refills between the two calls.
				resp, err = post(t, context.Background(), rt, "http://oai.test/v1/chat/completions", small)
				require.NoError(t, err)
				_, _ = readBody(t, resp)
				assert.Equal(t, tt.second, resp.StatusCode)
				if tt.second != http.StatusOK {
					assert.Equal(t, failure.RateLimited.String(), resp.Header.Get("X-Llmclient-Class"))
				}
			})
		})
	}
}
