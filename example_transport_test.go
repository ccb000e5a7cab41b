package llmclient_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/openai"
)

// The Transport protects requests that other code (an SDK, or plain net/http as here)
// sends to an upstream's base URL: the upstream's first answer is a 429, which the
// Transport retries after its Retry-After, with a key from the Client's pool in place of
// the caller's. The caller sees one 200.
func ExampleClient_Transport() {
	var calls atomic.Int32
	var lastKey atomic.Value
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lastKey.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1) == 1 {
			w.Header().Set("retry-after-ms", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
			return
		}
		io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,`+
			`"message":{"role":"assistant","content":"Hello!"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`)
	}))
	defer upstream.Close()

	provider, err := openai.New(openai.WithBaseURL(upstream.URL))
	if err != nil {
		panic(err)
	}
	client, err := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{
		Name: "openai", Provider: provider, Keys: []string{"sk-from-the-pool"},
	}))
	if err != nil {
		panic(err)
	}
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	hc := &http.Client{Transport: client.Transport(base)} // hand this to your SDK

	req, _ := http.NewRequest(http.MethodPost, upstream.URL+"/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hi"}]}`))
	req.Header.Set("Authorization", "Bearer sk-the-caller-s-own")
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, strings.Contains(string(body), "Hello!"))
	fmt.Println("upstream calls:", calls.Load(), "| key it saw:", lastKey.Load())
	// Output:
	// 200 true
	// upstream calls: 2 | key it saw: Bearer sk-from-the-pool
}
