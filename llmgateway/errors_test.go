package llmgateway_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/llmclient/llmclient/llmgateway"
)

// upstreamError answers every request with status and body (and headers kv).
func upstreamError(status int, body string, kv ...string) func(w http.ResponseWriter, r *http.Request, n int) bool {
	return func(w http.ResponseWriter, r *http.Request, n int) bool {
		for i := 0; i+1 < len(kv); i += 2 {
			w.Header().Set(kv[i], kv[i+1])
		}
		w.Header().Set("content-type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
		return true
	}
}

func TestUpstreamFailuresAnswerInTheFrontDoorsShape(t *testing.T) {
	cases := []struct {
		name       string
		status     int
		body       string
		hdr        []string
		extra      string
		wantStatus int
		oaType     string
		oaCode     string
		anType     string
		noRetry    bool
		retryAfter int // seconds, 0 for none
	}{
		{name: "quota exhausted", status: 429, body: `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
			wantStatus: 429, oaType: "insufficient_quota", oaCode: "insufficient_quota", anType: "rate_limit_error", noRetry: true},
		{name: "rate limited beyond the deadline", status: 429, body: `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			hdr: []string{"retry-after", "30"}, extra: "timeouts: {request: 2s}",
			wantStatus: 429, oaType: "rate_limit_error", oaCode: "rate_limit_exceeded", anType: "rate_limit_error", retryAfter: 30},
		{name: "context length", status: 400, body: `{"error":{"message":"This model's maximum context length is 128000 tokens","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			wantStatus: 400, oaType: "invalid_request_error", oaCode: "context_length_exceeded", anType: "invalid_request_error", noRetry: true},
		{name: "bad request", status: 400, body: `{"error":{"message":"Invalid value for temperature","type":"invalid_request_error","param":"temperature","code":null}}`,
			wantStatus: 400, oaType: "invalid_request_error", anType: "invalid_request_error", noRetry: true},
		{name: "server error", status: 500, body: `{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`,
			wantStatus: 502, oaType: "server_error", oaCode: "upstream_error", anType: "api_error"},
		{name: "overloaded", status: 503, body: `{"error":{"message":"The engine is currently overloaded","type":"service_unavailable_error","param":null,"code":"server_is_overloaded"}}`,
			wantStatus: 503, oaType: "service_unavailable_error", oaCode: "server_is_overloaded", anType: "overloaded_error"},
		{name: "upstream auth", status: 401, body: `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			wantStatus: 502, oaType: "server_error", oaCode: "upstream_authentication_failed", anType: "api_error", noRetry: true},
		{name: "model not found", status: 404, body: `{"error":{"message":"The model does not exist","type":"invalid_request_error","param":null,"code":"model_not_found"}}`,
			wantStatus: 404, oaType: "invalid_request_error", oaCode: "model_not_found", anType: "not_found_error", noRetry: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
			oa.setHandler(upstreamError(tc.status, tc.body, tc.hdr...))
			for _, stream := range []bool{false, true} {
				// A fresh gateway for each request: a failure can cool or evict the key.
				s := strconv.FormatBool(stream)
				g := startGateway(t, baseConfig(oa, an, tc.extra))
				resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","stream":`+s+`,"messages":[{"role":"user","content":"hi"}]}`)
				checkError(t, "openai stream="+s, resp, body, tc.wantStatus, tc.noRetry, tc.retryAfter)
				m := decode(t, body)
				if at(m, "error", "type") != tc.oaType || (tc.oaCode != "" && at(m, "error", "code") != tc.oaCode) || at(m, "error", "message") == "" {
					t.Fatalf("openai body: %s", body)
				}
				g = startGateway(t, baseConfig(oa, an, tc.extra))
				resp, body = post(t, g.api.URL+"/v1/messages", "gw-key-a", `{"model":"gpt-4o","max_tokens":5,"stream":`+s+`,"messages":[{"role":"user","content":"hi"}]}`)
				checkError(t, "anthropic stream="+s, resp, body, tc.wantStatus, tc.noRetry, tc.retryAfter)
				m = decode(t, body)
				if at(m, "type") != "error" || at(m, "error", "type") != tc.anType || at(m, "error", "message") == "" {
					t.Fatalf("anthropic body: %s", body)
				}
			}
		})
	}
}

func checkError(t *testing.T, what string, resp *http.Response, body string, status int, noRetry bool, retryAfter int) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("%s: status %d, want %d: %s", what, resp.StatusCode, status, body)
	}
	if got := resp.Header.Get("x-should-retry") == "false"; got != noRetry {
		t.Fatalf("%s: x-should-retry %q", what, resp.Header.Get("x-should-retry"))
	}
	if retryAfter > 0 {
		ra, _ := strconv.Atoi(resp.Header.Get("retry-after"))
		if ra < retryAfter-1 || ra > retryAfter+1 {
			t.Fatalf("%s: retry-after %q, want about %d", what, resp.Header.Get("retry-after"), retryAfter)
		}
	} else if resp.Header.Get("retry-after") != "" {
		t.Fatalf("%s: unexpected retry-after %q", what, resp.Header.Get("retry-after"))
	}
	if !strings.HasPrefix(resp.Header.Get("content-type"), "application/json") {
		t.Fatalf("%s: content-type %q", what, resp.Header.Get("content-type"))
	}
}

func TestLocalRefusalsSayWhenToRetry(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	t.Run("tenant limit", func(t *testing.T) {
		g := startGateway(t, baseConfig(oa, an, `
limiter: {mode: fail_fast}
tenant_limits: {rpm: 1, request_burst: 1}
`))
		req := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
		if resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", req); resp.StatusCode != 200 {
			t.Fatalf("first: %d %s", resp.StatusCode, body)
		}
		resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", req)
		if resp.StatusCode != 429 || resp.Header.Get("retry-after") == "" || resp.Header.Get("retry-after-ms") == "" {
			t.Fatalf("second: %d %v %s", resp.StatusCode, resp.Header, body)
		}
		if at(decode(t, body), "error", "code") != "rate_limit_exceeded" {
			t.Fatalf("body: %s", body)
		}
		// Another tenant's partition is untouched.
		if resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-b", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 200 {
			t.Fatalf("tenant b: %d %s", resp.StatusCode, body)
		}
	})
	t.Run("budget", func(t *testing.T) {
		g := startGateway(t, baseConfig(oa, an, `
budgets:
  - {name: tiny, scope: each_tenant, cap_usd: 0.000001}
`))
		resp, body := post(t, g.api.URL+"/v1/messages", "gw-key-a", `{"model":"gpt-4o","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode != 429 || resp.Header.Get("x-should-retry") != "false" {
			t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
		}
		if m := decode(t, body); at(m, "error", "type") != "rate_limit_error" {
			t.Fatalf("body: %s", body)
		}
		_, body = post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
		if at(decode(t, body), "error", "code") != "budget_exceeded" {
			t.Fatalf("body: %s", body)
		}
	})
	t.Run("every key cooling", func(t *testing.T) {
		oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
		oa.setHandler(upstreamError(429, `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`, "retry-after", "30"))
		g := startGateway(t, baseConfig(oa, an, "timeouts: {request: 2s}"))
		req := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
		post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", req)
		resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", req)
		if ra, _ := strconv.Atoi(resp.Header.Get("retry-after")); ra < 28 || ra > 31 || resp.StatusCode != 503 {
			t.Fatalf("%d retry-after %q: %s", resp.StatusCode, resp.Header.Get("retry-after"), body)
		}
		if oa.count() != 1 {
			t.Fatalf("the cooling key was called again: %d calls", oa.count())
		}
	})
	t.Run("breaker open", func(t *testing.T) {
		g := startGateway(t, baseConfig(oa, an, ""))
		if err := g.Client().ForceBreakerOpen("oa"); err != nil {
			t.Fatal(err)
		}
		resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode != 503 || at(decode(t, body), "error", "code") != "upstream_unavailable" {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	})
}

func TestGatewayRefusalsAreVendorShaped(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, "max_request_bytes: 300"))
	chat := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	msgs := `{"model":"gpt-4o","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	big := `{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("x", 400) + `"}]}`
	for _, tc := range []struct {
		name, path, key, body string
		status                int
		oaType, anType        string
	}{
		{"unknown key", "/v1/chat/completions", "nope", chat, 401, "invalid_request_error", "authentication_error"},
		{"no key", "/v1/messages", "", msgs, 401, "invalid_request_error", "authentication_error"},
		{"model not allowed", "/v1/chat/completions", "gw-key-b", chat, 403, "invalid_request_error", "permission_error"},
		{"model not allowed", "/v1/messages", "gw-key-b", msgs, 403, "invalid_request_error", "permission_error"},
		{"too large", "/v1/messages", "gw-key-a", big, 413, "invalid_request_error", "request_too_large"},
		{"not json", "/v1/chat/completions", "gw-key-a", `{"model":`, 400, "invalid_request_error", "invalid_request_error"},
		{"no messages", "/v1/messages", "gw-key-a", `{"model":"gpt-4o","max_tokens":5}`, 400, "invalid_request_error", "invalid_request_error"},
	} {
		t.Run(tc.name+tc.path, func(t *testing.T) {
			resp, body := post(t, g.api.URL+tc.path, tc.key, tc.body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			m := decode(t, body)
			if strings.HasSuffix(tc.path, "/messages") {
				if at(m, "type") != "error" || at(m, "error", "type") != tc.anType {
					t.Fatalf("body %s", body)
				}
			} else if at(m, "error", "type") != tc.oaType {
				t.Fatalf("body %s", body)
			}
		})
	}
	if oa.count() != 0 {
		t.Fatalf("refused requests reached the upstream %d times", oa.count())
	}
	if strings.Contains(g.logs.String(), "nope") || strings.Contains(g.logs.String(), "gw-key") {
		t.Fatal("a caller key was logged")
	}
}

func TestTenantBudgetsAreIsolated(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, `
budgets:
  - {name: each, scope: each_tenant, cap_usd: 0.0002}
`))
	refused := false
	for i := 0; i < 10 && !refused; i++ {
		resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
		switch resp.StatusCode {
		case 200:
		case 429:
			refused = at(decode(t, body), "error", "code") == "budget_exceeded"
		default:
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	if !refused {
		t.Fatal("tenant a was never refused by its budget")
	}
	calls := oa.count()
	resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-b", `{"model":"gpt-4o-mini","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || oa.count() != calls+1 {
		t.Fatalf("tenant b paid for tenant a: %d %s", resp.StatusCode, body)
	}
}

func TestSampleConfigLoads(t *testing.T) {
	cfg, err := llmgateway.LoadFile("sample.yaml", env("OPENAI_API_KEY", "sk-1", "ANTHROPIC_API_KEY", "sk-2",
		"LLMGATEWAY_TEAM_KEY", "gw-team", "LLMGATEWAY_ADMIN_TOKEN", "admin"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := llmgateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := llmgateway.LoadFile("sample.yaml", env()); err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY is not set") {
		t.Fatalf("without the environment: %v", err)
	}
}

func TestFailoverBenchConfigLoads(t *testing.T) {
	cfg, err := llmgateway.LoadFile("failoverbench.yaml", env("FB_WALL_KEY", "wall", "FB_TENANT_KEY", "bench",
		"FB_ADMIN_TOKEN", "admin"))
	if err != nil {
		t.Fatal(err)
	}
	// Every scenario model is a group, primary then fallback, and the fallback serves it
	// as the bench's fallback model.
	want := map[string]string{
		"fb-s01-429-retry-after": "fb-ok", "fb-s02-429-persistent": "fb-ok", "fb-s03-500-then-200": "fb-ok",
		"fb-s04-503-persistent": "fb-ok", "fb-s05-reset": "fb-ok", "fb-s06-no-response": "fb-ok",
		"fb-s07-slow-ttft": "fb-ok", "fb-s08-stream-cut": "fb-ok", "fb-s09-stream-stall": "fb-ok",
		"fb-s10-malformed-chunk": "fb-ok", "fb-s11-no-done": "fb-ok", "fb-s12-context-length": "fb-ok",
		"fb-s13-content-filter": "fb-ok", "fb-s14-stream-cut": "fb-ok-noprefill", "fb-s15-flap": "fb-ok",
		"fb-s16-503-persistent": "fb-ok",
	}
	groups := map[string][]string{}
	for _, g := range cfg.Groups {
		groups[g.Name] = g.Upstreams
	}
	var fallback map[string]string
	for _, u := range cfg.Upstreams {
		if u.Name == "fallback" {
			fallback = u.Models
		}
	}
	if len(groups) != len(want) || len(fallback) != len(want) {
		t.Fatalf("%d groups and %d fallback models, want %d", len(groups), len(fallback), len(want))
	}
	for model, fb := range want {
		if got := groups[model]; len(got) != 2 || got[0] != "primary" || got[1] != "fallback" {
			t.Errorf("group %s: %v", model, got)
		}
		if fallback[model] != fb {
			t.Errorf("fallback serves %s as %q, want %q", model, fallback[model], fb)
		}
	}
	// The bench runs with the sample's timeouts, retry, limiter and breaker settings:
	// nothing is tuned for it beyond the wall's upstreams and its models.
	sample, err := llmgateway.LoadFile("sample.yaml", env("OPENAI_API_KEY", "sk-1", "ANTHROPIC_API_KEY", "sk-2",
		"LLMGATEWAY_TEAM_KEY", "gw-team", "LLMGATEWAY_ADMIN_TOKEN", "admin"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Timeouts != sample.Timeouts || cfg.Retry.BackoffInitial != 0 || cfg.Retry.MaxRetryAfter != 0 || cfg.Limiter.Mode != "" || cfg.Breaker != nil || cfg.Timeouts.FirstToken <= 0 {
		t.Fatalf("the bench's settings differ from the sample's: %+v %+v", cfg.Timeouts, sample.Timeouts)
	}
	g, err := llmgateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
