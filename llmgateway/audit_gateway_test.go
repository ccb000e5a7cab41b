package llmgateway_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient/llmgateway"
)

// Claims of docs/gateway.md about what every answer carries, where the key is read, the
// size limit, the error rows the other tests do not reach, the access log, /metrics, hot
// reload and shutdown.

const auditChat = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`

// callHeaders checks x-llmclient-upstream, -attempts and -overhead-ms.
func callHeaders(t *testing.T, what string, resp *http.Response, upstream string, attempts int) {
	t.Helper()
	if got := resp.Header.Get("x-llmclient-upstream"); got != upstream {
		t.Errorf("%s: x-llmclient-upstream %q, want %q", what, got, upstream)
	}
	if got := resp.Header.Get("x-llmclient-attempts"); got != strconv.Itoa(attempts) {
		t.Errorf("%s: x-llmclient-attempts %q, want %d", what, got, attempts)
	}
	if ms, err := strconv.ParseFloat(resp.Header.Get("x-llmclient-overhead-ms"), 64); err != nil || ms < 0 {
		t.Errorf("%s: x-llmclient-overhead-ms %q", what, resp.Header.Get("x-llmclient-overhead-ms"))
	}
}

// TestAuditEveryAnswerCarriesTheCallHeaders: "Every answer carries x-request-id (the
// caller's, or a new one), x-llmclient-upstream, x-llmclient-attempts and
// x-llmclient-overhead-ms" — a one-shot, a stream, an answer after a retry, an upstream
// failure after its retries, and a local refusal (which reached no upstream: no upstream
// or attempts to name).
func TestAuditEveryAnswerCarriesTheCallHeaders(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, ""))
	url := g.api.URL + "/v1/chat/completions"

	resp, body := post(t, url, "gw-key-a", auditChat, "x-request-id", "caller-id-1")
	if resp.StatusCode != 200 || resp.Header.Get("x-request-id") != "caller-id-1" {
		t.Fatalf("one-shot: %d x-request-id %q: %s", resp.StatusCode, resp.Header.Get("x-request-id"), body)
	}
	callHeaders(t, "one-shot", resp, "oa", 1)

	resp, _ = post(t, url, "gw-key-a", auditChat)
	if id := resp.Header.Get("x-request-id"); id == "" || id == "caller-id-1" {
		t.Errorf("no caller id: x-request-id %q, want a new one", id)
	}
	resp, _ = post(t, url, "gw-key-a", auditChat, "x-request-id", strings.Repeat("i", 129))
	if id := resp.Header.Get("x-request-id"); id == "" || len(id) > 128 {
		t.Errorf("an id over 128 bytes was echoed (%d bytes)", len(id))
	}

	resp, body = post(t, url, "gw-key-a", `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || !strings.Contains(body, "[DONE]") || resp.Header.Get("x-request-id") == "" {
		t.Fatalf("stream: %d %s", resp.StatusCode, body)
	}
	callHeaders(t, "stream", resp, "oa", 1)

	oa.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		if n%2 == 0 {
			return upstreamError(500, `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`)(w, r, n)
		}
		return false
	})
	resp, body = post(t, url, "gw-key-a", auditChat)
	if resp.StatusCode != 200 {
		t.Fatalf("after a retry: %d %s", resp.StatusCode, body)
	}
	callHeaders(t, "served after a retry", resp, "oa", 2)

	oa.setHandler(upstreamError(500, `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`))
	resp, body = post(t, url, "gw-key-a", auditChat)
	if resp.StatusCode != 502 || resp.Header.Get("x-request-id") == "" {
		t.Fatalf("upstream failure: %d %s", resp.StatusCode, body)
	}
	callHeaders(t, "upstream failure", resp, "oa", 2)

	resp, _ = post(t, url, "nope", auditChat)
	if resp.StatusCode != 401 || resp.Header.Get("x-request-id") == "" || resp.Header.Get("x-llmclient-overhead-ms") == "" {
		t.Errorf("local refusal: %d, headers %v", resp.StatusCode, resp.Header)
	}
	if resp.Header.Get("x-llmclient-upstream") != "" || resp.Header.Get("x-llmclient-attempts") != "" {
		t.Errorf("a refusal that reached no upstream names one: %v", resp.Header)
	}
}

// TestAuditRequestIDHeaderIsConfigurable: headers.request_id names the header read and
// echoed.
func TestAuditRequestIDHeaderIsConfigurable(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, "headers: {request_id: x-trace-id}"))
	resp, _ := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", auditChat, "x-trace-id", "trace-7")
	if resp.StatusCode != 200 || resp.Header.Get("x-trace-id") != "trace-7" {
		t.Fatalf("%d x-trace-id %q", resp.StatusCode, resp.Header.Get("x-trace-id"))
	}
}

// TestAuditGatewayKeyAndPaths: "The gateway key is read from Authorization: Bearer …,
// x-api-key or api-key", and "the same paths without /v1 work too"; "n other than 1 is
// refused".
func TestAuditGatewayKeyAndPaths(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, ""))
	for _, tc := range []struct{ path, header, value string }{
		{"/v1/chat/completions", "Authorization", "Bearer gw-key-a"},
		{"/chat/completions", "x-api-key", "gw-key-a"},
		{"/messages", "api-key", "gw-key-a"},
		{"/embeddings", "x-api-key", "gw-key-a"},
	} {
		body := auditChat
		switch tc.path {
		case "/messages":
			body = `{"model":"gpt-4o","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
		case "/embeddings":
			body = `{"model":"text-embedding-3-small","input":"hi"}`
		}
		resp, out := post(t, g.api.URL+tc.path, "", body, tc.header, tc.value)
		if resp.StatusCode != 200 {
			t.Errorf("%s with %s: %d %s", tc.path, tc.header, resp.StatusCode, out)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, g.api.URL+"/models", nil)
	req.Header.Set("x-api-key", "gw-key-b")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"gpt-4o-mini"`) || strings.Contains(string(b), `"claude-sonnet"`) {
		t.Errorf("GET /models for tenant b: %d %s", resp.StatusCode, b)
	}
	calls := oa.count()
	resp, out := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","n":2,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 400 || oa.count() != calls {
		t.Errorf("n: 2 answered %d (%d upstream calls): %s", resp.StatusCode, oa.count()-calls, out)
	}
}

// TestAuditRequestSizeLimit: "body over max_request_bytes → 413 request_too_large": a body
// of exactly the limit passes, one byte more is refused before any upstream call; the
// default limit is 4 MiB.
func TestAuditRequestSizeLimit(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	body := func(n int) string {
		pre, post := `{"model":"gpt-4o","messages":[{"role":"user","content":"`, `"}]}`
		return pre + strings.Repeat("x", n-len(pre)-len(post)) + post
	}
	g := startGateway(t, baseConfig(oa, an, "max_request_bytes: 1000"))
	if resp, out := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", body(1000)); resp.StatusCode != 200 {
		t.Fatalf("a body of exactly the limit: %d %s", resp.StatusCode, out)
	}
	calls := oa.count()
	resp, out := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", body(1001))
	if resp.StatusCode != 413 || at(decode(t, out), "error", "code") != "request_too_large" || oa.count() != calls {
		t.Fatalf("one byte over: %d %s (%d upstream calls)", resp.StatusCode, out, oa.count()-calls)
	}
	d := startGateway(t, baseConfig(oa, an, ""))
	if resp, out := post(t, d.api.URL+"/v1/chat/completions", "gw-key-a", body(4<<20+1)); resp.StatusCode != 413 {
		t.Fatalf("default limit, 4 MiB + 1: %d %.200s", resp.StatusCode, out)
	}
}

// TestAuditErrorRowsNotCoveredElsewhere: the table's rows for an upstream key without
// permission (502 upstream_permission_denied), a content filter (200 with the filtered
// answer), a timeout (504), and a model no budget can price (403 model_unpriced).
func TestAuditErrorRowsNotCoveredElsewhere(t *testing.T) {
	t.Run("permission", func(t *testing.T) {
		oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
		oa.setHandler(upstreamError(403, `{"error":{"message":"not allowed","type":"invalid_request_error","param":null,"code":"permission_denied"}}`))
		g := startGateway(t, baseConfig(oa, an, ""))
		resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", auditChat)
		checkError(t, "permission", resp, body, 502, true, 0)
		if at(decode(t, body), "error", "code") != "upstream_permission_denied" {
			t.Fatalf("body %s", body)
		}
	})
	t.Run("content filter", func(t *testing.T) {
		oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
		oa.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
			w.Header().Set("content-type", "application/json")
			io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"partial"},"finish_reason":"content_filter"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`)
			return true
		})
		g := startGateway(t, baseConfig(oa, an, ""))
		resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", auditChat)
		if resp.StatusCode != 200 || at(decode(t, body), "choices", 0, "finish_reason") != "content_filter" {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
		oa.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
			<-r.Context().Done()
			return true
		})
		g := startGateway(t, baseConfig(oa, an, "timeouts: {request: 100ms}"))
		resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", auditChat)
		if resp.StatusCode != 504 || at(decode(t, body), "error", "type") != "timeout_error" {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		resp, body = post(t, g.api.URL+"/v1/messages", "gw-key-a", `{"model":"gpt-4o","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode != 504 || at(decode(t, body), "error", "type") != "timeout_error" {
			t.Fatalf("anthropic: %d %s", resp.StatusCode, body)
		}
	})
	t.Run("unpriced", func(t *testing.T) {
		oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
		cfg := strings.Replace(baseConfig(oa, an, "budgets: [{name: all, cap_usd: 10}]"), "gpt-4o-mini: gpt-4o-mini", "gpt-4o-mini: no-price-model-x", 1)
		g := startGateway(t, cfg)
		resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
		checkError(t, "unpriced", resp, body, 403, true, 0)
		if at(decode(t, body), "error", "code") != "model_unpriced" || oa.count() != 0 {
			t.Fatalf("body %s, %d upstream calls", body, oa.count())
		}
	})
}

// TestAuditAccessLogAndKeys: the access log's line has request_id, route, tenant, model,
// stream, status, upstream, attempts, class (on a failure), cached (on a hit),
// duration_ms, overhead_ms, tokens and cost (when priced); a key evicted after an auth failure is
// logged by its label, and no key (the caller's, the upstream's, the admin token) is
// ever in the log, nor the upstream key its own error message quoted in the answer.
func TestAuditAccessLogAndKeys(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	// A budget turns pricing on (the embedded table): without one, or pricing.file, every
	// cost is unknown and the line has no cost_usd.
	g := startGateway(t, baseConfig(oa, an, "cache: {enabled: true}\nadmin: {listen: 127.0.0.1:0, token_env: ADMIN_TOKEN}\nbudgets: [{name: all, cap_usd: 100}]"))
	url := g.api.URL + "/v1/chat/completions"
	oa.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		w.Header().Set("content-type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`)
		return true
	})
	for range 2 {
		if resp, body := post(t, url, "gw-key-a", auditChat); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	oa.setHandler(upstreamError(401, `{"error":{"message":"Incorrect API key provided: sk-upstream-1","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`))
	if resp, body := post(t, url, "gw-key-a", `{"model":"gpt-4o","messages":[{"role":"user","content":"other"}]}`); resp.StatusCode != 502 || strings.Contains(body, "sk-upstream-1") {
		t.Fatalf("auth failure: %d %s", resp.StatusCode, body)
	}
	logs := g.logs.String()
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	var requests []map[string]any
	for _, l := range lines {
		if m := decode(t, l); m["msg"] == "request" {
			requests = append(requests, m)
		}
	}
	if len(requests) != 3 {
		t.Fatalf("%d access log lines, want 3:\n%s", len(requests), logs)
	}
	first := requests[0]
	for _, f := range []string{"request_id", "route", "tenant", "model", "stream", "status", "upstream", "attempts", "duration_ms", "overhead_ms", "input_tokens", "output_tokens", "cost_usd"} {
		if _, ok := first[f]; !ok {
			t.Errorf("the access log line lacks %s: %v", f, first)
		}
	}
	if requests[1]["cached"] != true {
		t.Errorf("the second, identical request is not logged as cached: %v", requests[1])
	}
	if requests[2]["class"] != "auth" || requests[2]["status"] != float64(502) {
		t.Errorf("the failure's line: %v", requests[2])
	}
	if !strings.Contains(logs, `"msg":"key evicted"`) || !strings.Contains(logs, `"key":"key#1"`) {
		t.Errorf("the eviction is not logged by its label:\n%s", logs)
	}
	for _, secret := range []string{"sk-upstream-1", "gw-key-a", "admin-secret"} {
		if strings.Contains(logs, secret) {
			t.Errorf("%q is in the log", secret)
		}
	}
}

// TestAuditMetricsNames: /metrics has llmgateway_requests_total{route,tenant,status},
// llmgateway_overhead_seconds and llmgateway_request_duration_seconds beside the GenAI
// metrics (duration, token usage, time to first chunk) and llmclient's own (breakers,
// keys, limiters); metrics.disabled removes /metrics.
func TestAuditMetricsNames(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	cfg := strings.Replace(baseConfig(oa, an, "admin: {listen: 127.0.0.1:0, token_env: ADMIN_TOKEN}"),
		"keys_env: [UP_KEY]\n    models: {gpt-4o", "keys_env: [UP_KEY]\n    limits: {rpm: 1000}\n    models: {gpt-4o", 1)
	g := startGateway(t, cfg)
	for _, s := range []string{"false", "true"} {
		if resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","stream":`+s+`,"messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	code, body := admin(t, g, "GET", "/metrics", "")
	for _, want := range []string{`llmgateway_requests_total{`, `status="200"`, `tenant="a"`, `route="openai.chat"`, "llmgateway_overhead_seconds_bucket", "llmgateway_request_duration_seconds_bucket",
		"gen_ai_client_operation_duration", "gen_ai_client_token_usage", "gen_ai_client_operation_time_to_first_chunk",
		"llmclient_breaker_state", "llmclient_key_state", "llmclient_limiter_remaining"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("metrics (%d) lack %q", code, want)
		}
	}
	off := startGateway(t, baseConfig(oa, an, "admin: {listen: 127.0.0.1:0, token_env: ADMIN_TOKEN}\nmetrics: {disabled: true}"))
	if code, _ := admin(t, off, "GET", "/metrics", ""); code != 404 {
		t.Errorf("metrics.disabled: /metrics answered %d", code)
	}
}

// TestAuditReloadLiveFields: max_request_bytes, timeouts.request, shutdown_grace, the
// admin token and tenants change live; a reload that changes two restart-only fields
// (cache, retry) names both, and so does one changing log.format; nothing changes then.
func TestAuditReloadLiveFields(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	base := baseConfig(oa, an, "admin: {listen: 127.0.0.1:0, token_env: ADMIN_TOKEN}\n")
	file := writeConfig(t, base)
	g := startGatewayFile(t, file)
	big := `{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("x", 600) + `"}]}`
	if resp, _ := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", big); resp.StatusCode != 200 {
		t.Fatalf("before: %d", resp.StatusCode)
	}
	reload := func(yaml string) error {
		t.Helper()
		cfg, err := parseWith(yaml, "ADMIN_TOKEN2", "admin-secret-2")
		if err != nil {
			t.Fatal(err)
		}
		return g.Reload(cfg)
	}
	live := strings.Replace(base, "token_env: ADMIN_TOKEN}", "token_env: ADMIN_TOKEN2}\nmax_request_bytes: 500\nshutdown_grace: 1s\ntimeouts: {request: 50ms}", 1)
	live = strings.Replace(live, "models: [gpt-4o-mini]", "models: [gpt-4o-mini, gpt-4o]", 1)
	if err := reload(live); err != nil {
		t.Fatalf("live reload: %v", err)
	}
	if resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", big); resp.StatusCode != 413 {
		t.Errorf("max_request_bytes not applied: %d %s", resp.StatusCode, body)
	}
	if resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-b", auditChat); resp.StatusCode != 200 {
		t.Errorf("tenant b's new model: %d %s", resp.StatusCode, body)
	}
	if code, _ := admin(t, g, "GET", "/admin/snapshot", "admin-secret"); code != 401 {
		t.Errorf("the old admin token still works: %d", code)
	}
	if code, _ := admin(t, g, "GET", "/admin/snapshot", "admin-secret-2"); code != 200 {
		t.Errorf("the new admin token: %d", code)
	}
	oa.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		<-r.Context().Done()
		return true
	})
	if resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", auditChat); resp.StatusCode != 504 {
		t.Errorf("timeouts.request not applied: %d %s", resp.StatusCode, body)
	}
	oa.setHandler(nil)

	refused := live + "cache: {enabled: true}\nretry: {max_attempts: 5}\n"
	refused = strings.Replace(refused, "retry: {backoff_initial: 1ms, backoff_max: 2ms, max_attempts: 2}\n", "", 1)
	err := reload(refused)
	if err == nil || !strings.Contains(err.Error(), "cache: changing it needs a restart") || !strings.Contains(err.Error(), "retry: changing it needs a restart") {
		t.Errorf("two restart-only fields: %v", err)
	}
	if err := reload(strings.Replace(live, "log: {level: warn}", "log: {level: warn, format: text}", 1)); err == nil || !strings.Contains(err.Error(), "log: changing it needs a restart") {
		t.Errorf("log.format: %v", err)
	}
	if resp, _ := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", big); resp.StatusCode != 413 {
		t.Errorf("a refused reload changed max_request_bytes: %d", resp.StatusCode)
	}
}

// TestAuditShutdownRefusesNewRequests: "/readyz (503 once shutdown began)" and "a
// request arriving on an open keep-alive connection gets 503".
func TestAuditShutdownRefusesNewRequests(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, "admin: {listen: 127.0.0.1:0, token_env: ADMIN_TOKEN}"))
	if code, _ := admin(t, g, "GET", "/readyz", ""); code != 200 {
		t.Fatalf("readyz before: %d", code)
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, _ := admin(t, g, "GET", "/readyz", ""); code != 503 {
		t.Errorf("readyz after shutdown began: %d", code)
	}
	if code, _ := admin(t, g, "GET", "/healthz", ""); code != 200 {
		t.Errorf("healthz after shutdown began: %d", code)
	}
	resp, body := post(t, g.api.URL+"/v1/messages", "gw-key-a", `{"model":"gpt-4o","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 503 || at(decode(t, body), "error", "type") != "overloaded_error" || oa.count() != 0 {
		t.Errorf("a request after shutdown began: %d %s, %d upstream calls", resp.StatusCode, body, oa.count())
	}
}

// parseWith parses yaml with the tests' environment plus kv.
func parseWith(yaml string, kv ...string) (*llmgateway.Config, error) {
	return llmgateway.Parse([]byte(yaml), env(append(append(append([]string{}, baseEnv...), reloadEnv...), kv...)...))
}

// TestAuditCallerGoneIsLoggedAsCanceled: a caller that goes away before any answer is
// logged with status 499 and class canceled, and the upstream call is canceled with it.
func TestAuditCallerGoneIsLoggedAsCanceled(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	upstreamGone := make(chan struct{})
	arrived := make(chan struct{})
	oa.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		close(arrived)
		<-r.Context().Done()
		close(upstreamGone)
		return true
	})
	g := startGateway(t, baseConfig(oa, an, ""))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.api.URL+"/v1/chat/completions", strings.NewReader(auditChat))
	req.Header.Set("Authorization", "Bearer gw-key-a")
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-arrived
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the canceled request got an answer")
	}
	<-upstreamGone
	// The line is logged when the handler returns, after the upstream call ended.
	for i := 0; !strings.Contains(g.logs.String(), `"msg":"request"`); i++ {
		if i > 2000 {
			t.Fatalf("no access log line:\n%s", g.logs.String())
		}
		time.Sleep(time.Millisecond)
	}
	logs := g.logs.String()
	if !strings.Contains(logs, `"status":499`) || !strings.Contains(logs, `"class":"canceled"`) {
		t.Fatalf("the access log line:\n%s", logs)
	}
}

// TestAuditTenantIsThePartition: "the tenant is the call's partition (its own limiter
// buckets, each_tenant budgets, cache entries)": with the cache on, tenant b's request
// identical to tenant a's cached one goes to the upstream, and then is cached for b.
func TestAuditTenantIsThePartition(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, "cache: {enabled: true}"))
	q := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"same question"}]}`
	for i, key := range []string{"gw-key-a", "gw-key-a", "gw-key-b", "gw-key-b"} {
		if resp, body := post(t, g.api.URL+"/v1/chat/completions", key, q); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
	}
	if oa.count() != 2 {
		t.Fatalf("%d upstream calls, want 2: one per tenant", oa.count())
	}
}

// TestAuditOpenServesWithoutKeys: "open: true serves without keys", every model allowed.
func TestAuditOpenServesWithoutKeys(t *testing.T) {
	oa := newVendor(t, "openai")
	g := startGateway(t, "open: true\nlog: {level: warn}\nupstreams: [{name: oa, vendor: openai, base_url: '"+oa.URL+"/v1'}]\n")
	for _, key := range []string{"", "any-key"} {
		if resp, body := post(t, g.api.URL+"/v1/chat/completions", key, `{"model":"whatever-model","messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 200 {
			t.Fatalf("key %q: %d %s", key, resp.StatusCode, body)
		}
	}
}

// TestAuditAdminReload: "POST /admin/reload" reloads the file; "an invalid one is refused,
// logged, and nothing changes"; a gateway whose configuration was not read from a file
// answers the reload with an error.
func TestAuditAdminReload(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	base := baseConfig(oa, an, "admin: {listen: 127.0.0.1:0, token_env: ADMIN_TOKEN}\n")
	file := writeConfig(t, base)
	g := startGatewayFile(t, file)
	if err := os.WriteFile(file, []byte(strings.Replace(base, "models: [gpt-4o-mini]", "models: [gpt-4o-mini, gpt-4o]", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, body := admin(t, g, "POST", "/admin/reload", ""); code != 401 {
		t.Fatalf("reload without the token: %d %s", code, body)
	}
	if code, body := admin(t, g, "POST", "/admin/reload", "admin-secret"); code != 200 {
		t.Fatalf("reload: %d %s", code, body)
	}
	if resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-b", auditChat); resp.StatusCode != 200 {
		t.Fatalf("the reloaded tenant models: %d %s", resp.StatusCode, body)
	}
	if err := os.WriteFile(file, []byte(base+"limiter: {mode: never}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, body := admin(t, g, "POST", "/admin/reload", "admin-secret")
	if code != 400 || !strings.Contains(body, "limiter.mode") {
		t.Fatalf("invalid reload: %d %s", code, body)
	}
	if !strings.Contains(g.logs.String(), `"msg":"reload refused"`) {
		t.Errorf("the refused reload is not logged:\n%s", g.logs.String())
	}
	if resp, _ := post(t, g.api.URL+"/v1/chat/completions", "gw-key-b", auditChat); resp.StatusCode != 200 {
		t.Errorf("the refused reload changed the tenants: %d", resp.StatusCode)
	}
	noFile := startGateway(t, base)
	if code, body := admin(t, noFile, "POST", "/admin/reload", "admin-secret"); code != 400 || !strings.Contains(body, "not read from a file") {
		t.Errorf("reload without a file: %d %s", code, body)
	}
}

// TestAuditStreamCutAfterCommitEndsTheVendorsWay: "A failure after it ends the stream the
// vendor's way: an OpenAI data: {"error":…} line without [DONE], an Anthropic event:
// error. A stream never ends cleanly when the upstream cut it." (Continuation off, so the
// cut is not repaired on another attempt.)
func TestAuditStreamCutAfterCommitEndsTheVendorsWay(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	oa.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		w.Header().Set("content-type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}`+"\n\n")
		return true // the body ends here: no finish reason, no [DONE]
	})
	g := startGateway(t, baseConfig(oa, an, "streams: {continuation: false}"))
	resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	evs := parseSSE(t, body)
	if resp.StatusCode != 200 || len(evs) < 2 || !strings.Contains(evs[0].data, "Hel") || strings.Contains(body, "data: [DONE]") {
		t.Fatalf("openai: %d %q", resp.StatusCode, body)
	}
	if last := decode(t, evs[len(evs)-1].data); at(last, "error", "message") == nil || at(last, "error", "type") == nil {
		t.Fatalf("openai: the last event is not an error: %q", evs[len(evs)-1].data)
	}
	resp, body = post(t, g.api.URL+"/v1/messages", "gw-key-a", `{"model":"gpt-4o","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	evs = parseSSE(t, body)
	if resp.StatusCode != 200 || len(evs) < 2 || !strings.Contains(body, "Hel") || strings.Contains(body, "event: message_stop") {
		t.Fatalf("anthropic: %d %q", resp.StatusCode, body)
	}
	if last := evs[len(evs)-1]; last.name != "error" || at(decode(t, last.data), "type") != "error" {
		t.Fatalf("anthropic: the last event is not an error: %+v", last)
	}
}

// TestAuditReloadChangesGroupMembers: "group members" change live (Client.Update): a
// group reloaded without its first upstream sends its requests to the one left.
func TestAuditReloadChangesGroupMembers(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	base := baseConfig(oa, an, "")
	g := startGateway(t, base)
	if resp, _ := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"both","messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 200 || resp.Header.Get("x-llmclient-upstream") != "oa" {
		t.Fatalf("before: %d upstream %q", resp.StatusCode, resp.Header.Get("x-llmclient-upstream"))
	}
	cfg, err := parseWith(strings.Replace(base, "upstreams: [oa, an]", "upstreams: [an]", 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if resp, _ := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"both","messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 200 || resp.Header.Get("x-llmclient-upstream") != "an" {
		t.Fatalf("after: %d upstream %q", resp.StatusCode, resp.Header.Get("x-llmclient-upstream"))
	}
}

// TestAuditBudgetRefusalSaysWhenRoomFrees: budget_exceeded carries "retry-after when the
// window frees room, else x-should-retry: false": a rolling window frees room as its
// spend ages out, so its refusal says when (within the window's hour).
func TestAuditBudgetRefusalSaysWhenRoomFrees(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, "budgets: [{name: roll, scope: each_tenant, window: 'rolling:1h', cap_usd: 0.0002}]"))
	for i := 0; ; i++ {
		resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode == 200 {
			if i > 20 {
				t.Fatal("never refused")
			}
			continue
		}
		ra, err := strconv.Atoi(resp.Header.Get("retry-after"))
		if resp.StatusCode != 429 || at(decode(t, body), "error", "code") != "budget_exceeded" || err != nil || ra < 1 || ra > 3600 || resp.Header.Get("x-should-retry") == "false" {
			t.Fatalf("%d retry-after %q x-should-retry %q: %s", resp.StatusCode, resp.Header.Get("retry-after"), resp.Header.Get("x-should-retry"), body)
		}
		return
	}
}

// TestAuditModelsMapBoundsAnUpstream: "with a map the upstream serves only what it maps":
// a name only the anthropic upstream maps goes there alone, and a name no upstream maps
// is 404 model_not_found without any upstream call.
func TestAuditModelsMapBoundsAnUpstream(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, ""))
	resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"claude-sonnet","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || an.count() != 1 || oa.count() != 0 || !strings.Contains(an.lastBody(), `"claude-sonnet-4-5"`) {
		t.Fatalf("mapped by an only: %d %s; calls oa %d an %d, body sent %s", resp.StatusCode, body, oa.count(), an.count(), an.lastBody())
	}
	resp, body = post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"mystery","messages":[{"role":"user","content":"hi"}]}`)
	checkError(t, "unmapped", resp, body, 404, true, 0)
	if at(decode(t, body), "error", "code") != "model_not_found" || oa.count()+an.count() != 1 {
		t.Fatalf("unmapped: %s; calls oa %d an %d", body, oa.count(), an.count())
	}
}

// TestAuditRequestNumbersAtTheirEdges: a request's numbers below their range are a 400
// before any upstream call (max_tokens, max_completion_tokens, n), one beyond a Go int is
// a 400, and sampling parameters out of the upstream's range are clamped by its adapter
// (provider/openai: temperature to [0, 2], top_p to [0, 1]), as docs/gateway.md says.
func TestAuditRequestNumbersAtTheirEdges(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, ""))
	for _, tc := range []struct {
		path, body string
		status     int
		sent       string // a member the upstream's body has, for a 200
	}{
		{"/v1/chat/completions", `{"model":"gpt-4o","max_tokens":-1,"messages":[{"role":"user","content":"hi"}]}`, 400, ""},
		{"/v1/chat/completions", `{"model":"gpt-4o","max_completion_tokens":-5,"messages":[{"role":"user","content":"hi"}]}`, 400, ""},
		{"/v1/chat/completions", `{"model":"gpt-4o","max_tokens":1e400,"messages":[{"role":"user","content":"hi"}]}`, 400, ""},
		{"/v1/chat/completions", `{"model":"gpt-4o","n":0,"messages":[{"role":"user","content":"hi"}]}`, 400, ""},
		{"/v1/messages", `{"model":"gpt-4o","max_tokens":-1,"messages":[{"role":"user","content":"hi"}]}`, 400, ""},
		{"/v1/chat/completions", `{"model":"gpt-4o","temperature":-1,"messages":[{"role":"user","content":"hi"}]}`, 200, `"temperature":0`},
		{"/v1/chat/completions", `{"model":"gpt-4o","temperature":7,"messages":[{"role":"user","content":"hi"}]}`, 200, `"temperature":2`},
		{"/v1/chat/completions", `{"model":"gpt-4o","top_p":1e300,"messages":[{"role":"user","content":"hi"}]}`, 200, `"top_p":1`},
	} {
		calls := oa.count()
		resp, body := post(t, g.api.URL+tc.path, "gw-key-a", tc.body)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %d %s", tc.body, resp.StatusCode, body)
			continue
		}
		if tc.status == 400 && oa.count() != calls {
			t.Errorf("%s: refused after an upstream call", tc.body)
		}
		if tc.sent != "" && !strings.Contains(oa.lastBody(), tc.sent) {
			t.Errorf("%s: the upstream got %s, want %s in it", tc.body, oa.lastBody(), tc.sent)
		}
	}
}
