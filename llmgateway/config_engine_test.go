package llmgateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/llmclient/llmclient/llmgateway"
)

// TestConfigEngineSettingsReportProblems: every engine setting out of its range, and every
// unknown name, is reported in one error, with the file's names.
func TestConfigEngineSettingsReportProblems(t *testing.T) {
	_, err := llmgateway.Parse([]byte(`
open: true
upstreams:
  - {name: a, vendor: openai, quota_scopes: [ghost], limits: {itpm: -1, otpm: -5}}
quota_scopes:
  - {name: s}
  - {name: s, limits: {rpm: -1}, models: [""]}
cache_affinity: 1048577
limiter:
  queue_target: 2h
  batch_share: 0
  wait_threshold: {batch: -1s}
  token_ratios: [{match: gpt, ratio: .nan}]
  model_families: [{match: "", family: x}]
timeouts: {call_budget: 25h}
streams: {throughput_floor: {tokens_per_second: 10}}
breaker: {recovery_ramp: -1s}
decisions: {rate_limit: {retry: true}}
`), env())
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`upstream "a": limits: must not be negative`, `unknown scope "ghost"`, `quota_scope "s": limits: required`,
		`quota_scope "s": the name is used twice`, `quota_scope "s": limits: must not be negative`, `models: "" is not`,
		"cache_affinity: 1048577 bytes", "limiter.queue_target", "limiter.batch_share", "limiter.wait_threshold",
		"limiter.token_ratios[0]", "limiter.model_families[0]", "timeouts.call_budget", "streams.throughput_floor",
		"breaker.recovery_ramp", `decisions: "rate_limit" is not a failure class`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
}

// scopedConfig is an openai upstream "oa" (gpt-4o) and an anthropic upstream "an"
// (claude-sonnet), open (no tenant keys), the limiters failing fast, with extra added.
func scopedConfig(oa, an *vendor, upstreamExtra, extra string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
open: true
log: {level: warn}
limiter: {mode: fail_fast}
retry: {backoff_initial: 1ms, backoff_max: 2ms, max_attempts: 2}
upstreams:
  - {name: oa, vendor: openai, base_url: %s/v1, keys_env: [UP_KEY], models: {gpt-4o: gpt-4o}%s}
  - {name: an, vendor: anthropic, base_url: %s, keys_env: [UP_KEY], models: {claude-sonnet: claude-sonnet-4-5}%s}
%s`, oa.URL, upstreamExtra, an.URL, upstreamExtra, extra)
}

const chatTo = `{"model":%q,"messages":[{"role":"user","content":"hi"}],"max_tokens":20}`

// TestConfigQuotaScopeIsSharedAcrossUpstreams: a quota scope of one request a minute that
// both upstreams name lets one call through and refuses the next, on the other upstream,
// before it reaches the vendor, with a Retry-After; without the scope both pass.
func TestConfigQuotaScopeIsSharedAcrossUpstreams(t *testing.T) {
	for _, scoped := range []bool{true, false} {
		oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
		up, extra := "", ""
		if scoped {
			up, extra = ", quota_scopes: [project]", "quota_scopes: [{name: project, limits: {rpm: 1}}]"
		}
		g := startGateway(t, scopedConfig(oa, an, up, extra))
		resp, body := post(t, g.api.URL+"/v1/chat/completions", "", fmt.Sprintf(chatTo, "gpt-4o"))
		if resp.StatusCode != 200 {
			t.Fatalf("first call: %d %s", resp.StatusCode, body)
		}
		resp, body = post(t, g.api.URL+"/v1/chat/completions", "", fmt.Sprintf(chatTo, "claude-sonnet"))
		switch {
		case scoped && (resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || an.count() != 0):
			t.Errorf("second call under the scope: %d (Retry-After %q, vendor saw %d): %s", resp.StatusCode, resp.Header.Get("Retry-After"), an.count(), body)
		case !scoped && resp.StatusCode != 200:
			t.Errorf("second call without a scope: %d %s", resp.StatusCode, body)
		}
	}
}

// TestConfigInputTokenLimit: an itpm limit refuses the second call of a burst that its
// input alone exhausts; an otpm limit of the same size does not (the calls generate
// little), so the limits reach the engine as the quantities they name.
func TestConfigInputTokenLimit(t *testing.T) {
	long := strings.Repeat("lorem ipsum dolor sit amet ", 200) // ~1,000 tokens
	body := fmt.Sprintf(`{"model":"gpt-4o","messages":[{"role":"user","content":%q}],"max_tokens":20}`, long)
	for _, q := range []string{"itpm", "otpm"} {
		oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
		g := startGateway(t, scopedConfig(oa, an, fmt.Sprintf(", limits: {%s: 1200}", q), ""))
		var codes []int
		for range 2 {
			resp, _ := post(t, g.api.URL+"/v1/chat/completions", "", body)
			codes = append(codes, resp.StatusCode)
		}
		if q == "itpm" && (codes[0] != 200 || codes[1] != http.StatusTooManyRequests) {
			t.Errorf("itpm 1200: statuses %v, want [200 429]", codes)
		}
		if q == "otpm" && (codes[0] != 200 || codes[1] != 200) {
			t.Errorf("otpm 1200: statuses %v, want [200 200]", codes)
		}
	}
}

// TestConfigPromptCacheKeyReachesTheUpstream: the OpenAI front door passes
// prompt_cache_key on to an OpenAI upstream.
func TestConfigPromptCacheKeyReachesTheUpstream(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, scopedConfig(oa, an, "", "cache_affinity: 4096"))
	resp, body := post(t, g.api.URL+"/v1/chat/completions", "",
		`{"model":"gpt-4o","prompt_cache_key":"tenant-9","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if !strings.Contains(oa.lastBody(), `"prompt_cache_key":"tenant-9"`) {
		t.Errorf("upstream body %s has no prompt_cache_key", oa.lastBody())
	}
}

// TestConfigDecisionReplacesARow: with decisions.server_error empty (no retry, no
// failover), a 503 of the group's first upstream is the answer; by default the call
// fails over to the second.
func TestConfigDecisionReplacesARow(t *testing.T) {
	for _, replaced := range []bool{true, false} {
		oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
		oa.setHandler(func(w http.ResponseWriter, _ *http.Request, _ int) bool {
			w.Header().Set("content-type", "application/json")
			w.WriteHeader(503)
			_, _ = w.Write([]byte(`{"error":{"message":"busy","type":"server_error"}}`))
			return true
		})
		extra := "groups: [{name: both, upstreams: [oa, an]}]\n"
		if replaced {
			extra += "decisions: {server_error: {}}\n"
		}
		cfg := strings.Replace(scopedConfig(oa, an, "", extra), "models: {gpt-4o: gpt-4o}", "models: {gpt-4o: gpt-4o, both: gpt-4o}", 1)
		cfg = strings.Replace(cfg, "models: {claude-sonnet: claude-sonnet-4-5}", "models: {claude-sonnet: claude-sonnet-4-5, both: claude-sonnet-4-5}", 1)
		g := startGateway(t, cfg)
		resp, body := post(t, g.api.URL+"/v1/chat/completions", "", fmt.Sprintf(chatTo, "both"))
		if replaced && (resp.StatusCode == 200 || an.count() != 0 || oa.count() != 1) {
			t.Errorf("server_error row replaced: %d, oa %d calls, an %d: %s", resp.StatusCode, oa.count(), an.count(), body)
		}
		if !replaced && (resp.StatusCode != 200 || an.count() != 1) {
			t.Errorf("default row: %d, an %d calls: %s", resp.StatusCode, an.count(), body)
		}
	}
}
