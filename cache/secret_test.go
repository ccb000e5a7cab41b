package cache_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/provider/openai"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const secretKey = "sk-test-CACHE-SECRET-0a1b2c3d"

// echoingUpstream is an OpenAI-compatible server that puts the API key it received in its
// errors, and in a stream that breaks after its first chunk, as a careless proxy might.
func echoingUpstream() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		switch r.Header.Get("X-Scenario") {
		case "stream":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n")
			fmt.Fprint(w, "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
			fmt.Fprint(w, "data: [DONE]\n\n")
		case "broken-stream":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n")
			fmt.Fprintf(w, "data: {\"error\":{\"message\":\"bad key %s\",\"type\":\"server_error\",\"code\":null}}\n\n", key)
		case "401":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(401)
			fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s","type":"invalid_request_error","code":"invalid_api_key"}}`, key)
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"c1","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
		}
	}))
}

// The API key never reaches a cache key, a stored entry (in memory or encoded), or an
// event, whatever the upstream echoes back.
func TestCredentialsNeverReachTheCache(t *testing.T) {
	srv := echoingUpstream()
	defer srv.Close()
	mem, err := cache.NewMemory(cache.MemoryConfig{})
	require.NoError(t, err)
	store := &keyRecordingStore{recordingStore: recordingStore{Memory: mem}}
	var mu sync.Mutex
	var seen []string
	c, err := cache.New(store, cache.WithDedup(true), cache.WithObserver(func(_ context.Context, e cache.Event) {
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%+v %v", e, e.Err))
		mu.Unlock()
	}))
	require.NoError(t, err)
	for _, sc := range []string{"ok", "stream", "broken-stream", "401"} {
		p, err := openai.New(openai.WithBaseURL(srv.URL), openai.WithHeader("X-Scenario", sc))
		require.NoError(t, err)
		cl, err := llmclient.New(llmclient.WithMiddleware(c.Middleware()), llmclient.WithMaxAttempts(1),
			llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: []string{secretKey}}))
		require.NoError(t, err)
		req := &llmclient.Request{Model: "gpt-4o-mini", Messages: []llmclient.Message{llmclient.UserMessage(sc)}}
		ctx := cache.WithIdempotencyKey(context.Background(), "job-"+sc)
		if strings.Contains(sc, "stream") {
			s, err := cl.Stream(ctx, req)
			require.NoError(t, err)
			_, err = readAll(t, s)
			if err != nil {
				assert.NotContains(t, err.Error(), secretKey)
			}
		} else if _, err := cl.Complete(ctx, req); err != nil {
			assert.NotContains(t, fmt.Sprintf("%+v", err), secretKey)
		}
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	require.NotEmpty(t, store.set, "answers were stored")
	for _, k := range store.keys {
		assert.NotContains(t, k, secretKey)
	}
	for _, e := range store.set {
		assert.NotContains(t, fmt.Sprintf("%+v", e), secretKey)
		b, err := cache.MarshalEntry(e)
		require.NoError(t, err)
		assert.NotContains(t, string(b), secretKey)
	}
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, seen)
	assert.Contains(t, strings.Join(seen, "\n"), "bad key [REDACTED]", "the echoed key reached an event, redacted")
	for _, s := range seen {
		assert.NotContains(t, s, secretKey)
	}
}

// keyRecordingStore records the keys it is asked for, too.
type keyRecordingStore struct {
	recordingStore
	keys []string
}

func (s *keyRecordingStore) Get(ctx context.Context, key string) (*cache.Entry, error) {
	s.mu.Lock()
	s.keys = append(s.keys, key)
	s.mu.Unlock()
	return s.Memory.Get(ctx, key)
}

func (s *keyRecordingStore) Set(ctx context.Context, key string, e *cache.Entry, ttl time.Duration) error {
	s.mu.Lock()
	s.keys = append(s.keys, key)
	s.mu.Unlock()
	return s.recordingStore.Set(ctx, key, e, ttl)
}
