package llmgateway_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// A client that has a one-shot answer finds the request in the access log and in the
// metrics, and the answer carries its length. Repeated: the line and the count are
// written before the answer is sent, not at some later moment.
func TestOneShotAnswerComesAfterItsLogLineAndCount(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, ""))
	const n = 50
	for i := range n {
		resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","messages":[{"role":"user","content":"Say hello."}]}`)
		if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(body)) {
			t.Fatalf("status %d, length %d for %d bytes", resp.StatusCode, resp.ContentLength, len(body))
		}
		if got := strings.Count(g.logs.String(), `"msg":"request"`); got != i+1 {
			t.Fatalf("after answer %d: %d access log lines", i+1, got)
		}
	}
	_, metrics := admin(t, g, "GET", "/metrics", "")
	if !strings.Contains(metrics, `llmgateway_requests_total{`) || !strings.Contains(metrics, "} "+strconv.Itoa(n)) {
		t.Fatalf("metrics do not count the %d requests:\n%.2000s", n, metrics)
	}
}
