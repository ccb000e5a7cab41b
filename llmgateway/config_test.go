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

// TestEmptyModelsMapServesEveryModel: `models: {}` is "empty": the upstream serves every
// model under its own name, as when models is left out (not "only what it maps": nothing).
func TestEmptyModelsMapServesEveryModel(t *testing.T) {
	oa := newVendor(t, "openai")
	g := startGateway(t, "open: true\nlog: {level: warn}\nupstreams: [{name: oa, vendor: openai, base_url: '"+oa.URL+"/v1', models: {}}]\n")
	resp, body := post(t, g.api.URL+"/v1/chat/completions", "", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || !strings.Contains(oa.lastBody(), `"gpt-4o"`) {
		t.Fatalf("models: {} should serve every model under its own name: %d %s", resp.StatusCode, body)
	}
}

// TestParseRefusesASecondYAMLDocument: a file is one YAML document; what follows a "---"
// is not silently dropped (here an unknown field, which would be an error in the first).
func TestParseRefusesASecondYAMLDocument(t *testing.T) {
	for _, second := range []string{"no_such_field: 1\n", "upstreams: []\n", ""} {
		_, err := llmgateway.Parse([]byte(auditMinimal+"---\n"+second), env())
		if err == nil || !strings.Contains(err.Error(), "more than one YAML document") {
			t.Errorf("a second document %q: %v", second, err)
		}
	}
	// A document's explicit start and end markers are one document.
	if _, err := llmgateway.Parse([]byte("---\n"+auditMinimal+"...\n"), env()); err != nil {
		t.Fatal(err)
	}
}

// TestHedgeTakesANumberOfSeconds: groups[].hedge is "a delay or auto", and a delay, like
// every duration of the file, may be a number of seconds.
func TestHedgeTakesANumberOfSeconds(t *testing.T) {
	const two = "open: true\nupstreams: [{name: u, vendor: openai, base_url: 'http://127.0.0.1:1/v1'}, {name: v, vendor: openai, base_url: 'http://127.0.0.1:2/v1'}]\n"
	for _, h := range []string{"2", "0.5", "1.5s", "auto"} {
		if _, err := llmgateway.Parse([]byte(two+"groups: [{name: g, upstreams: [u, v], hedge: "+h+"}]\n"), env()); err != nil {
			t.Errorf("hedge: %s: %v", h, err)
		}
	}
	for _, h := range []string{"-1", "0", "2 hours", "soon"} {
		if _, err := llmgateway.Parse([]byte(two+"groups: [{name: g, upstreams: [u, v], hedge: '"+h+"'}]\n"), env()); err == nil || !strings.Contains(err.Error(), "hedge") {
			t.Errorf("hedge: %q accepted: %v", h, err)
		}
	}
}

// TestBreakerSharedStarGoesAlone: "*" shares every upstream's breaker; written with names
// it would say both "every one" and "these", so it is refused rather than either dropped.
func TestBreakerSharedStarGoesAlone(t *testing.T) {
	const redis = auditMinimal + "redis: {addr: 127.0.0.1:1}\n"
	if _, err := llmgateway.Parse([]byte(redis+"breaker: {shared: ['*', u]}\n"), env()); err == nil || !strings.Contains(err.Error(), `breaker.shared: "*"`) {
		t.Fatalf(`shared: ["*", u]: %v`, err)
	}
	for _, s := range []string{"['*']", "[u]"} {
		if _, err := llmgateway.Parse([]byte(redis+"breaker: {shared: "+s+"}\n"), env()); err != nil {
			t.Errorf("shared: %s: %v", s, err)
		}
	}
}

// TestCacheSizesNeedTheMemoryCache: max_bytes and max_entries bound the in-memory cache;
// with cache.redis there is none (rediscache keeps no local tier), so they are refused
// instead of ignored.
func TestCacheSizesNeedTheMemoryCache(t *testing.T) {
	const redis = auditMinimal + "redis: {addr: 127.0.0.1:1}\n"
	for _, c := range []string{"max_bytes: 1000000", "max_entries: 100"} {
		_, err := llmgateway.Parse([]byte(redis+"cache: {enabled: true, redis: true, "+c+"}\n"), env())
		if err == nil || !strings.Contains(err.Error(), "max_bytes and max_entries bound the in-memory cache") {
			t.Errorf("%s with redis: true: %v", c, err)
		}
	}
	if _, err := llmgateway.Parse([]byte(redis+"cache: {enabled: true, redis: true, ttl: 1m}\n"), env()); err != nil {
		t.Fatal(err)
	}
	if _, err := llmgateway.Parse([]byte(redis+"cache: {enabled: true, max_entries: 100}\n"), env()); err != nil {
		t.Fatal(err)
	}
}
