package llmclient_test

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
)

// TestAuditTransportEvictedKeyRefusalSaysWhenItEnds: the Transport's refusal "carries
// Retry-After (whole seconds, rounded up) when the Client knows when the refusal ends".
// An evicted key's end is known (WithKeyEviction from the eviction, by EvictKey or by an
// auth failure), so the 503 answered while the only key is evicted carries a Retry-After
// of about the eviction's remaining time.
func TestAuditTransportEvictedKeyRefusalSaysWhenItEnds(t *testing.T) {
	for _, how := range []string{"EvictKey", "auth failure"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newScript(status(401, `{"error":{"message":"Incorrect API key","type":"invalid_request_error","code":"invalid_api_key"}}`))
				c := newClient(t, oaiUpstream(t, "a", "http://a.test/v1", "sk-a"), llmclient.WithKeyEviction(10*time.Minute))
				rt := c.Transport(memTransport{hostMux{"a.test": a}})
				const body = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
				if how == "EvictKey" {
					if err := c.EvictKey("a", "key#1"); err != nil {
						t.Fatal(err)
					}
				} else {
					resp, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions", body)
					if err != nil {
						t.Fatal(err)
					}
					if _, _ = readBody(t, resp); resp.StatusCode != 401 {
						t.Fatalf("the auth failure answered %d", resp.StatusCode)
					}
				}
				time.Sleep(time.Minute)
				calls := a.count()
				resp, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions", body)
				if err != nil {
					t.Fatal(err)
				}
				got, _ := readBody(t, resp)
				if resp.StatusCode != 503 || a.count() != calls {
					t.Fatalf("with the key evicted: %d %s, %d upstream calls", resp.StatusCode, got, a.count()-calls)
				}
				ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
				if err != nil || ra < 9*60-1 || ra > 9*60+1 {
					t.Errorf("Retry-After %q, want about %d s (the eviction's remaining 9 min); class %q",
						resp.Header.Get("Retry-After"), 9*60, resp.Header.Get("X-Llmclient-Class"))
				}
			})
		})
	}
}
