package llmgateway_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient/llmgateway"
)

// Claims of docs/gateway.md's Configuration section and Config's field comments: the
// defaults of a field left out, and what a number at 0, below 0 or far too large does.

const auditMinimal = "open: true\nupstreams: [{name: u, vendor: openai, base_url: 'http://127.0.0.1:1/v1'}]\n"

// TestAuditConfigDefaults: the documented default of each top-level field a file leaves
// out (Config's comments, sample.yaml).
func TestAuditConfigDefaults(t *testing.T) {
	cfg, err := llmgateway.Parse([]byte(auditMinimal), env())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:8080" || cfg.MaxRequestBytes != 4<<20 || cfg.ShutdownGrace.D() != 30*time.Second ||
		cfg.Log.Level != "info" || cfg.Log.Format != "json" || cfg.Headers.RequestID != "x-request-id" || cfg.Procs != 0 {
		t.Fatalf("defaults: listen %q, max_request_bytes %d, shutdown_grace %v, log %+v, request_id %q, procs %d",
			cfg.Listen, cfg.MaxRequestBytes, cfg.ShutdownGrace.D(), cfg.Log, cfg.Headers.RequestID, cfg.Procs)
	}
	// 0 is "left out": the default, not a zero limit.
	cfg, err = llmgateway.Parse([]byte(auditMinimal+"max_request_bytes: 0\nshutdown_grace: 0\n"), env())
	if err != nil || cfg.MaxRequestBytes != 4<<20 || cfg.ShutdownGrace.D() != 30*time.Second {
		t.Fatalf("explicit zeros: %v %+v", err, cfg)
	}
}

// TestAuditConfigNumbersAtTheirEdges: a number below its range or beyond it is a
// validation error naming the field; a large value in range is accepted as written.
func TestAuditConfigNumbersAtTheirEdges(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string // want "" means accepted
	}{
		{"negative max_request_bytes", "max_request_bytes: -1", "max_request_bytes: must not be negative"},
		{"huge max_request_bytes", "max_request_bytes: 9223372036854775807", ""},
		{"negative shutdown_grace", "shutdown_grace: -1s", "shutdown_grace: must not be negative"},
		{"negative procs", "procs: -1", "procs: must not be negative"},
		{"huge procs", "procs: 100000000", "procs:"},
		{"procs beyond int32", "procs: 4294967297", "procs:"},
		{"negative cache_affinity", "cache_affinity: -1", "cache_affinity"},
		{"huge cache_affinity", "cache_affinity: 2000000", "cache_affinity"},
		{"negative tenant_limits", "tenant_limits: {rpm: -5}", "tenant_limits: must not be negative"},
		{"huge limits", "tenant_limits: {rpm: 9223372036854775807, tpm: 9223372036854775807}", ""},
		{"negative retry", "retry: {max_attempts: -1}", "retry: max_attempts"},
		{"negative retry durations", "retry: {key_eviction: -1s}", "retry: durations must not be negative"},
		{"backoff alone", "retry: {backoff_initial: 1s}", "backoff_initial and backoff_max go together"},
		{"negative budget ratio", "retry: {budget_ratio: -0.1, budget_window: 1m}", "retry: budget_ratio"},
		{"budget floor without a ratio", "retry: {budget_floor: 5}", "budget_floor and budget_window need budget_ratio"},
		{"negative budget window without a ratio", "retry: {budget_window: -5s}", "retry:"},
		{"budget without a floor", "retry: {budget_ratio: 0.3, budget_window: 10s}", ""},
		{"budget ratio over 1000", "retry: {budget_ratio: 1001, budget_window: 10s}", "retry: budget_ratio"},
		{"budget ratio NaN", "retry: {budget_ratio: .nan, budget_window: 10s}", "retry: budget_ratio"},
		{"budget window over a day", "retry: {budget_ratio: 0.3, budget_window: 25h}", "retry: budget_ratio"},
		{"budget window under 10ms", "retry: {budget_ratio: 0.3, budget_window: 1ms}", "retry: budget_ratio"},
		{"budget at its edges", "retry: {budget_ratio: 1000, budget_window: 24h}", ""},
		{"queue_target 0 (off)", "limiter: {queue_target: 0}", ""},
		{"call_budget 0 (off)", "timeouts: {call_budget: 0}", ""},
		{"negative timeout", "timeouts: {idle: -1s}", "timeouts: must not be negative"},
		{"huge call_budget", "timeouts: {call_budget: 25h}", "timeouts.call_budget"},
		{"burst_fraction above 1", "limiter: {burst_fraction: 1.5}", "burst_fraction in [0, 1]"},
		{"batch_share 0", "limiter: {batch_share: 0}", "limiter.batch_share"},
		{"queue_target over an hour", "limiter: {queue_target: 2h}", "limiter.queue_target"},
		{"negative wait threshold", "limiter: {wait_threshold: {batch: -1s}}", "limiter.wait_threshold"},
		{"token ratio 0", "limiter: {token_ratios: [{match: gpt, ratio: 0}]}", "limiter.token_ratios[0]"},
		{"negative cache", "cache: {enabled: true, ttl: -1s}", "cache: must not be negative"},
		{"huge cache", "cache: {enabled: true, max_bytes: 9223372036854775807, max_entries: 2147483647}", ""},
		{"recovery ramp over an hour", "breaker: {recovery_ramp: 2h}", "breaker.recovery_ramp"},
		{"throughput floor 0", "streams: {throughput_floor: {tokens_per_second: 0, over: 10s}}", "streams.throughput_floor"},
		{"negative redis db", "redis: {addr: 127.0.0.1:1, db: -1}", "redis: db and timeout"},
		{"redis timeout over a minute", "redis: {addr: 127.0.0.1:1, timeout: 61s}", "redis.timeout"},
		{"redis timeout of a minute", "redis: {addr: 127.0.0.1:1, timeout: 1m}", ""},
		{"budget cap 0", "budgets: [{name: b, cap_usd: 0}]", "cap_usd must be positive"},
		{"budget cap huge", "budgets: [{name: b, cap_usd: 1e12}]", "at most 9,000,000"},
		{"negative weight", "upstreams: [{name: u, vendor: openai, base_url: 'http://127.0.0.1:1/v1', weight: -1}]", "weight must not be negative"},
		{"negative upstream timeout", "upstreams: [{name: u, vendor: openai, base_url: 'http://127.0.0.1:1/v1', timeout: -1s}]", "timeout must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := auditMinimal + tc.yaml + "\n"
			if strings.HasPrefix(tc.yaml, "upstreams:") {
				yaml = "open: true\n" + tc.yaml + "\n"
			}
			_, err := llmgateway.Parse([]byte(yaml), env())
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestAuditConfigDurationsAreReadWhole: a duration is "1.5s", "200ms", "2m" or a number of
// seconds. Anything else — a unit Go does not know, a number with words after it, a
// duration beyond time.Duration's range — is an error, never read as the number of
// seconds it begins with.
func TestAuditConfigDurationsAreReadWhole(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration // -1: an error
	}{
		{"1.5s", 1500 * time.Millisecond},
		{"200ms", 200 * time.Millisecond},
		{"2m", 2 * time.Minute},
		{"90", 90 * time.Second},
		{"0.5", 500 * time.Millisecond},
		{"0", 0},
		{"-3", -3 * time.Second},
		{"2 hours", -1},
		{"10 min", -1},
		{"2h30", -1},
		{"5x", -1},
		{"2562048h", -1}, // past time.Duration's 2562047h
		{"1e9", -1},
		{"NaN", -1},
	} {
		cfg, err := llmgateway.Parse([]byte(auditMinimal+"shutdown_grace: \""+tc.in+"\"\n"), env())
		switch {
		case tc.want == -1 && err == nil:
			t.Errorf("%q read as %v, want an error", tc.in, cfg.ShutdownGrace.D())
		case tc.want == -1:
		case tc.want < 0:
			if err == nil || !strings.Contains(err.Error(), "shutdown_grace: must not be negative") {
				t.Errorf("%q: %v, want the negative error", tc.in, err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case tc.want == 0 && cfg.ShutdownGrace.D() != 30*time.Second:
			t.Errorf("%q: %v, want the default", tc.in, cfg.ShutdownGrace.D())
		case tc.want != 0 && cfg.ShutdownGrace.D() != tc.want:
			t.Errorf("%q read as %v, want %v", tc.in, cfg.ShutdownGrace.D(), tc.want)
		}
	}
}

// TestAuditUpstreamAndBudgetDefaults: max_tokens_field defaults to the adapter's choice
// (max_tokens for a base_url other than api.openai.com; max_tokens_field overrides it),
// stream_usage to true (the upstream is asked for the usage chunk), and a budget's scope
// to client and its window to daily (UTC).
func TestAuditUpstreamAndBudgetDefaults(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, "admin: {listen: 127.0.0.1:0, token_env: ADMIN_TOKEN}\nbudgets: [{name: plain, cap_usd: 5}]"))
	if resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","max_tokens":7,"messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if b := oa.lastBody(); !strings.Contains(b, `"max_tokens":7`) || strings.Contains(b, `"max_completion_tokens"`) {
		t.Errorf("max_tokens_field default: the upstream got %s", b)
	}
	set := startGateway(t, strings.Replace(baseConfig(oa, an, ""), "keys_env: [UP_KEY]\n    models: {gpt-4o", "keys_env: [UP_KEY]\n    max_tokens_field: max_completion_tokens\n    models: {gpt-4o", 1))
	if resp, body := post(t, set.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","max_tokens":7,"messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if b := oa.lastBody(); !strings.Contains(b, `"max_completion_tokens":7`) || strings.Contains(b, `"max_tokens"`) {
		t.Errorf("max_tokens_field: max_completion_tokens: the upstream got %s", b)
	}
	if resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if b := oa.lastBody(); !strings.Contains(b, `"include_usage":true`) {
		t.Errorf("stream_usage default: the upstream got %s", b)
	}
	code, body := admin(t, g, "GET", "/admin/budgets", "admin-secret")
	var budgets []map[string]any
	if err := json.Unmarshal([]byte(body), &budgets); err != nil || code != 200 || len(budgets) != 1 {
		t.Fatalf("budgets %d: %s", code, body)
	}
	start, err1 := time.Parse(time.RFC3339, budgets[0]["window_start"].(string))
	end, err2 := time.Parse(time.RFC3339, budgets[0]["window_end"].(string))
	if budgets[0]["scope"] != "client" || err1 != nil || err2 != nil || end.Sub(start) != 24*time.Hour ||
		start.Location() != time.UTC || start.Hour() != 0 || start.Minute() != 0 {
		t.Errorf("budget defaults: %v", budgets[0])
	}
}
