package llmgateway_test

import (
	"strings"
	"testing"

	"github.com/llmclient/llmclient/llmgateway"
)

func TestConfigReportsEveryProblemAtOnce(t *testing.T) {
	_, err := llmgateway.Parse([]byte(`
log: {level: loud}
procs: -1
admin: {listen: 127.0.0.1:0, token_env: NO_TOKEN}
upstreams:
  - {name: a, vendor: openai, keys_env: [MISSING_KEY], limits: {rpm: -1}}
  - {name: a, vendor: cohere}
  - {vendor: azure}
groups:
  - {name: g, upstreams: [a, ghost], routing: fastest, fallback: [nowhere]}
tenants:
  - {name: t, keys_env: [T_KEY], models: []}
  - {name: u, keys_env: [T_KEY2], models: ["["]}
budgets:
  - {name: b, cap_usd: 0, window: weekly, scope: "tenant:nobody"}
retry: {max_attempts: -1}
timeouts: {attempt: -1s}
limiter: {mode: sometimes}
breaker: {failure_ratio: 2, shared: [a]}
cache: {enabled: true, redis: true}
`), func(k string) (string, bool) {
		if k == "T_KEY" || k == "T_KEY2" {
			return "same-key", true
		}
		return "", false
	})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"log.level", "admin.token_env: environment variable NO_TOKEN is not set", "MISSING_KEY is not set", `upstream "a": limits: must not be negative`,
		`upstream "a": the name is used twice`, `vendor "cohere"`, "upstreams[2]: name is required", "azure needs azure_endpoint",
		`unknown upstream "ghost"`, `routing "fastest"`, `unknown group "nowhere"`, `tenant "t": models: at least one`,
		`tenant "u": models: "[" is not a pattern`, `holds a key of tenant "t"`, "cap_usd must be positive", `unknown tenant "nobody"`,
		"retry: max_attempts", "timeouts: must not be negative", "limiter.mode", "breaker:", "breaker.shared: needs redis", "cache.redis: needs redis",
		"procs: must not be negative",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "same-key") {
		t.Fatal("the error shows a key")
	}
}

func TestConfigRejectsUnknownFieldsAndReadsJSON(t *testing.T) {
	if _, err := llmgateway.Parse([]byte("upstreams: []\nlisten_addr: x\n"), env()); err == nil || !strings.Contains(err.Error(), "listen_addr") {
		t.Fatalf("unknown field: %v", err)
	}
	if _, err := llmgateway.Parse(nil, env()); err == nil {
		t.Fatal("empty config accepted")
	}
	cfg, err := llmgateway.Parse([]byte(`{"open": true, "upstreams": [{"name": "x", "vendor": "openai", "base_url": "http://127.0.0.1:1/v1", "timeout": "1.5s"}]}`), env())
	if err != nil || cfg.Upstreams[0].Timeout.D().Seconds() != 1.5 {
		t.Fatalf("JSON config: %v", err)
	}
}
