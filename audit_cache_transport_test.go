package llmclient_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/openai"
)

// TestAuditCacheDoesNotServeTransportRequests: the response cache is middleware, and
// middleware wraps Complete and Stream only (llmclient.Middleware); Transport mode runs
// the layers under the SDK without passing through it. So with the cache installed,
// identical requests through the Transport each reach the upstream, the cache counts no
// lookup, and an answer Complete stored is not served to the Transport either.
func TestAuditCacheDoesNotServeTransportRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newScript(ok(chatOK))
		mem := memTransport{hostMux{"a.test": a}}
		p, err := openai.New(openai.WithBaseURL("http://a.test/v1"), openai.WithHTTPClient(&http.Client{Transport: mem}))
		if err != nil {
			t.Fatal(err)
		}
		ca := memoryCache(t)
		c := newClient(t, llmclient.WithMiddleware(ca.Middleware()),
			llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: []string{"sk-a"}}))
		rt := c.Transport(mem)
		const body = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
		send := func(what string) {
			t.Helper()
			resp, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions", body, "Authorization", "Bearer sk-a")
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if got, _ := readBody(t, resp); resp.StatusCode != 200 || got != chatOK {
				t.Fatalf("%s: %d %q", what, resp.StatusCode, got)
			}
		}
		send("first transport request")
		send("identical transport request")
		if a.count() != 2 {
			t.Errorf("two identical transport requests made %d upstream calls, want 2", a.count())
		}
		if s := ca.Stats(); s.Hits+s.Misses+s.Stored != 0 {
			t.Errorf("the cache saw transport requests: %+v", s)
		}

		req := &llmclient.Request{Model: "gpt-4o", Messages: []llmclient.Message{llmclient.UserMessage("hi")}}
		for range 2 {
			if _, err := c.Complete(context.Background(), req); err != nil {
				t.Fatal(err)
			}
		}
		if s := ca.Stats(); s.Hits != 1 || s.Misses != 1 || a.count() != 3 {
			t.Fatalf("Complete twice: %+v, %d upstream calls; want a miss, then a hit, 3 calls", s, a.count())
		}
		send("transport request after Complete stored the answer")
		if a.count() != 4 {
			t.Errorf("the transport was answered from the cache: %d upstream calls, want 4", a.count())
		}
	})
}
