package llmclient_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A one-shot 200 whose body is an error object (an OpenAI-compatible proxy's in-band
// error; Complete retries it too) is classified and retried like an error response, and
// answers the caller when it is the last; a completion with "error": null is a success. It
// was handed to the caller as a success at once: no retry, the breaker counted a success.
func TestTransportInBandErrorIn200IsRetried(t *testing.T) {
	const inBand = `{"error":{"message":"upstream connect error","type":"server_error","code":null}}`
	const withNull = `{"error":null,"id":"c1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`
	tests := []struct {
		name    string
		steps   []func(http.ResponseWriter, *http.Request)
		want    string
		calls   int
		classes []failure.Class
	}{
		{"retried", []func(http.ResponseWriter, *http.Request){ok(inBand), ok(chatOK)}, chatOK, 2,
			[]failure.Class{failure.ServerError, failure.None}},
		{"the last answers", []func(http.ResponseWriter, *http.Request){ok(inBand)}, inBand, 2,
			[]failure.Class{failure.ServerError, failure.ServerError}},
		{"null error is a success", []func(http.ResponseWriter, *http.Request){ok(withNull)}, withNull, 1,
			[]failure.Class{failure.None}},
		{"error as a value", []func(http.ResponseWriter, *http.Request){ok(`{"id":"x","status":"error"}`)}, `{"id":"x","status":"error"}`, 1,
			[]failure.Class{failure.None}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := newScript(tt.steps...)
				var log eventLog
				c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithMaxAttempts(2),
					llmclient.WithObserver(log.observe))
				resp, err := post(t, context.Background(), c.Transport(memTransport{up}), chatURL, chatBody)
				require.NoError(t, err)
				assert.Equal(t, 200, resp.StatusCode)
				got, err := readBody(t, resp)
				require.NoError(t, err)
				assert.JSONEq(t, tt.want, got)
				assert.Equal(t, tt.calls, up.count())
				at := log.kinds(event.Attempt)
				require.Len(t, at, len(tt.classes))
				for i, class := range tt.classes {
					assert.Equal(t, class, at[i].Class, "attempt %d", i+1)
				}
			})
		})
	}
}
