package llmgateway_test

import (
	"net/http"
	"strings"
	"testing"
)

// priorityConfig is baseConfig with oa limited to a burst of 10 requests, the limiters
// failing fast, and batch requests allowed a tenth of each limit.
func priorityConfig(oa, an *vendor) string {
	return strings.Replace(baseConfig(oa, an, "limiter: {mode: fail_fast, batch_share: 0.1}\n"),
		"keys_env: [UP_KEY]\n    models: {gpt-4o", "keys_env: [UP_KEY]\n    limits: {rpm: 60, request_burst: 10}\n    models: {gpt-4o", 1)
}

const priorityChat = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`

// TestPriorityHeaderBatchUsesTheBatchShare: x-llmclient-priority: batch (any case) makes the
// call ratelimit.Batch, so limiter.batch_share applies to it: here batch may use a tenth
// of a 10-request burst, one request, and the next batch requests are refused while
// interactive ones (the header's other value, or none) still have the rest.
func TestPriorityHeaderBatchUsesTheBatchShare(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, priorityConfig(oa, an))
	var codes []int
	for _, v := range []string{"batch", "Batch", "BATCH"} {
		resp, _ := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", priorityChat, "x-llmclient-priority", v)
		codes = append(codes, resp.StatusCode)
	}
	if codes[0] != 200 || codes[1] != 429 || codes[2] != 429 {
		t.Fatalf("batch requests under batch_share 0.1 of a 10-request burst: %v, want [200 429 429]", codes)
	}
	for _, v := range []string{"interactive", "Interactive", ""} {
		if resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", priorityChat, "x-llmclient-priority", v); resp.StatusCode != 200 {
			t.Fatalf("interactive (%q) after the batch share was used: %d %s", v, resp.StatusCode, body)
		}
	}
	if n := oa.count(); n != 4 {
		t.Fatalf("%d upstream calls, want 4 (the refused batch requests reach no upstream)", n)
	}
}

// TestPriorityHeaderOtherValuesAreRefused: any other value of x-llmclient-priority, or the
// header given twice, is a 400 naming the header, on every door, before any upstream call.
func TestPriorityHeaderOtherValuesAreRefused(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, ""))
	for _, tc := range []struct{ path, body, errType string }{
		{"/v1/chat/completions", priorityChat, "invalid_request_error"},
		{"/v1/messages", `{"model":"gpt-4o","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "invalid_request_error"},
		{"/v1/embeddings", `{"model":"text-embedding-3-small","input":"hi"}`, "invalid_request_error"},
	} {
		for _, v := range []string{"high", "u=1", "batchy", "0"} {
			resp, body := post(t, g.api.URL+tc.path, "gw-key-a", tc.body, "x-llmclient-priority", v)
			if resp.StatusCode != 400 || !strings.Contains(body, "x-llmclient-priority") {
				t.Errorf("%s with x-llmclient-priority %q: %d %s", tc.path, v, resp.StatusCode, body)
			}
		}
		req, _ := http.NewRequest(http.MethodPost, g.api.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer gw-key-a")
		req.Header.Add("x-llmclient-priority", "batch")
		req.Header.Add("x-llmclient-priority", "interactive")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("%s with the header twice: %d", tc.path, resp.StatusCode)
		}
	}
	if n := oa.count() + an.count(); n != 0 {
		t.Fatalf("%d upstream calls for refused requests", n)
	}
}
