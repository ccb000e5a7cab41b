package llmclient_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/openai"
	"github.com/llmclient/llmclient/slogobserver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// secretKey is recognizable so that any leak is found by a plain substring search.
const secretKey = "sk-test-SECRET-9f8e7d6c5b4a"

// leakyUpstream answers each request according to the X-Scenario header, and echoes the
// API key it received in every error message, as a careless vendor or proxy might.
func leakyUpstream(t *testing.T) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		body, _ := io.ReadAll(r.Body)
		scenario := r.Header.Get("X-Scenario")
		errBody := func(status int, typ, code string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s. You can find your API key at https://platform.openai.com/account/api-keys.","type":%q,"param":null,"code":%q}}`, key, typ, code)
		}
		switch scenario {
		case "401":
			errBody(401, "invalid_request_error", "invalid_api_key")
		case "429":
			w.Header().Set("Retry-After", "0")
			errBody(429, "requests", "rate_limit_exceeded")
		case "quota":
			errBody(429, "insufficient_quota", "insufficient_quota")
		case "400":
			errBody(400, "invalid_request_error", "invalid_value")
		case "500":
			errBody(500, "server_error", "")
		case "html":
			w.WriteHeader(502)
			fmt.Fprintf(w, "<html><body>Bad gateway for key %s</body></html>", key)
		case "stream-error":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"error\":{\"message\":\"bad key %s\",\"type\":\"server_error\",\"code\":null}}\n\n", key)
		default:
			if bytes.Contains(body, []byte(`"stream":true`)) {
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n")
				fmt.Fprint(w, "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
				fmt.Fprint(w, "data: [DONE]\n\n")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"c1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
		}
	}))
}

func TestAPIKeyNeverLeaks(t *testing.T) {
	srv := leakyUpstream(t)
	defer srv.Close()
	var logs bytes.Buffer
	var mu sync.Mutex
	var events []string
	logger := slog.New(slog.NewJSONHandler(&lockedWriter{w: &logs, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	slogObs := slogobserver.New(logger, slogobserver.WithErrorMessages(true)) // the whole vendor messages: the key must still be redacted
	scenarios := []string{"ok", "401", "429", "quota", "400", "500", "html", "stream-error", "stream-ok"}
	for _, sc := range scenarios {
		t.Run(sc, func(t *testing.T) {
			p, err := openai.New(openai.WithBaseURL(srv.URL), openai.WithHeader("X-Scenario", strings.TrimSuffix(sc, "-ok")))
			require.NoError(t, err)
			c := newClient(t, up("leaky", p, secretKey), llmclient.WithMaxAttempts(2),
				llmclient.WithBackoff(time.Millisecond, time.Millisecond),
				llmclient.WithObserver(func(_ context.Context, e llmclient.Event) {
					slogObs(context.Background(), e)
					mu.Lock()
					events = append(events, fmt.Sprintf("%+v", e))
					mu.Unlock()
				}))
			var errs []error
			if strings.HasPrefix(sc, "stream") {
				s, err := c.Stream(context.Background(), chatReq("gpt-4o-mini"))
				errs = append(errs, err)
				if err == nil {
					for s.Next() {
					}
					errs = append(errs, s.Err())
					s.Close()
				}
			} else {
				_, err := c.Complete(context.Background(), chatReq("gpt-4o-mini"))
				errs = append(errs, err)
			}
			for _, err := range errs {
				if err == nil {
					continue
				}
				for _, s := range []string{err.Error(), fmt.Sprintf("%v", err), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
					assert.NotContains(t, s, secretKey)
				}
				var e *llmclient.Error
				if assert.ErrorAs(t, err, &e) {
					for _, a := range e.Attempts {
						if a.Err != nil {
							assert.NotContains(t, a.Err.Error(), secretKey)
						}
					}
				}
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	assert.NotContains(t, logs.String(), secretKey)
	assert.NotEmpty(t, events)
	for _, e := range events {
		assert.NotContains(t, e, secretKey)
	}
	// The scenarios did produce vendor messages: the redaction, not silence, keeps the key out.
	assert.Contains(t, logs.String(), "[REDACTED]")
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
