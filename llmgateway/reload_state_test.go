package llmgateway_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmclient/llmclient/llmgateway"
)

const stateChat = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`

// reloadWith parses yaml with the tests' environment and reloads g with it.
func reloadWith(t *testing.T, g *gw, yaml string) error {
	t.Helper()
	cfg, err := parseWith(yaml)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return g.Reload(cfg)
}

// chatCode posts body to the chat door with key and returns the status.
func chatCode(t *testing.T, g *gw, key, body string) int {
	t.Helper()
	resp, _ := post(t, g.api.URL+"/v1/chat/completions", key, body)
	return resp.StatusCode
}

// TestReloadKeepsLimiterDebt: a reload that changes an upstream's limits (Client.Update
// SetLimits) keeps the token debt a large request left.
func TestReloadKeepsLimiterDebt(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	base := baseConfig(oa, an, "limiter: {mode: fail_fast}\n")
	withLimits := func(l string) string {
		return strings.Replace(base, "keys_env: [UP_KEY]\n    models: {gpt-4o", "keys_env: [UP_KEY]\n    limits: "+l+"\n    models: {gpt-4o", 1)
	}
	g := startGateway(t, withLimits("{tpm: 6000, token_burst: 1000}"))
	if c := chatCode(t, g, "gw-key-a", `{"model":"gpt-4o","max_tokens":5000,"messages":[{"role":"user","content":"hi"}]}`); c != 200 {
		t.Fatalf("large request: %d", c)
	}
	small := `{"model":"gpt-4o","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	if c := chatCode(t, g, "gw-key-a", small); c != 429 {
		t.Fatalf("no debt before the reload: %d", c)
	}
	if err := reloadWith(t, g, withLimits("{tpm: 6000, token_burst: 1000, rpm: 1000}")); err != nil {
		t.Fatal(err)
	}
	if c := chatCode(t, g, "gw-key-a", small); c != 429 {
		t.Fatalf("the reload forgave the debt: %d", c)
	}
}

// TestReloadKeepsTenantUsage: adding a tenant keeps tenant a's partition buckets; the new
// tenant has its own; a removed tenant's key gets 401.
func TestReloadKeepsTenantUsage(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	extra := "limiter: {mode: fail_fast}\ntenant_limits: {rpm: 60, request_burst: 2}\n"
	g := startGateway(t, baseConfig(oa, an, extra))
	for i := range 2 {
		if c := chatCode(t, g, "gw-key-a", stateChat); c != 200 {
			t.Fatalf("request %d: %d", i, c)
		}
	}
	if c := chatCode(t, g, "gw-key-a", stateChat); c != 429 {
		t.Fatalf("third: %d", c)
	}
	withC := strings.Replace(baseConfig(oa, an, "  - {name: c, keys_env: [TENANT_C], models: [gpt-4o]}\n"+extra), "  - name: b\n    keys_env: [TENANT_B]\n    models: [gpt-4o-mini]\n", "", 1)
	if err := reloadWith(t, g, withC); err != nil {
		t.Fatal(err)
	}
	if c := chatCode(t, g, "gw-key-a", stateChat); c != 429 {
		t.Errorf("tenant a's usage reset by the reload: %d", c)
	}
	if c := chatCode(t, g, "gw-key-c", stateChat); c != 200 {
		t.Errorf("new tenant c: %d", c)
	}
	if c := chatCode(t, g, "gw-key-b", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`); c != 401 {
		t.Errorf("removed tenant b's key: %d", c)
	}
}

// TestReloadKeepsBudgetSpend: adding a tenant keeps tenant a's each_tenant budget spend,
// and the new tenant does not spend a's.
func TestReloadKeepsBudgetSpend(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	extra := "budgets: [{name: roll, scope: each_tenant, window: 'rolling:1h', cap_usd: 0.0002}]\n"
	g := startGateway(t, baseConfig(oa, an, extra))
	req := `{"model":"gpt-4o","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	for i := 0; chatCode(t, g, "gw-key-a", req) == 200; i++ {
		if i > 20 {
			t.Fatal("never refused")
		}
	}
	if err := reloadWith(t, g, baseConfig(oa, an, "  - {name: c, keys_env: [TENANT_C], models: [gpt-4o]}\n"+extra)); err != nil {
		t.Fatal(err)
	}
	if c := chatCode(t, g, "gw-key-a", req); c != 429 {
		t.Errorf("tenant a's budget spend reset by the reload: %d", c)
	}
	if c := chatCode(t, g, "gw-key-c", req); c != 200 {
		t.Errorf("tenant c spends a's budget: %d", c)
	}
}

// TestReloadRefusesGroupOnUnservingMembers: a reload setting a group's members to
// upstreams that do not serve the group's name is refused, and the group still works.
func TestReloadRefusesGroupOnUnservingMembers(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	base := baseConfig(oa, an, "")
	base = strings.Replace(base, "  - name: both\n    upstreams: [oa, an]\n", "  - name: both\n    upstreams: [oa, an]\n  - name: solo\n    upstreams: [oa]\n", 1)
	base = strings.Replace(base, "any: gpt-4o, both: gpt-4o}", "any: gpt-4o, both: gpt-4o, solo: gpt-4o}", 1)
	g := startGateway(t, base)
	if _, err := parseWith(strings.Replace(base, "upstreams: [oa]\n", "upstreams: [an]\n", 1)); err == nil || !strings.Contains(err.Error(), `none of its upstreams serves model "solo"`) {
		t.Fatalf("a group moved to members that do not serve it: %v", err)
	}
	if err := g.ReloadFile(writeConfig(t, strings.Replace(base, "upstreams: [oa]\n", "upstreams: [an]\n", 1))); err == nil {
		t.Fatal("the reload was applied")
	}
	if c := chatCode(t, g, "gw-key-a", `{"model":"solo","messages":[{"role":"user","content":"hi"}]}`); c != 200 {
		t.Fatalf("after the refused reload: %d", c)
	}
}

// TestDuplicateUpstreamKeyDoesNotDoubleItsLimits: two variables holding the same upstream
// API key do not double its per-key limits.
func TestDuplicateUpstreamKeyDoesNotDoubleItsLimits(t *testing.T) {
	oa := newVendor(t, "openai")
	yaml := "open: true\nlog: {level: warn}\nlimiter: {mode: fail_fast}\nupstreams: [{name: oa, vendor: openai, base_url: '" + oa.URL + "/v1', keys_env: [UP_KEY, UP_KEY_COPY], limits: {rpm: 60, request_burst: 1}}]\n"
	cfg, err := llmgateway.Parse([]byte(yaml), env("UP_KEY", "sk-same", "UP_KEY_COPY", "sk-same"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := llmgateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Shutdown(t.Context())
	api := httptestServer(t, g.Handler())
	ok := 0
	for range 3 {
		if resp, _ := post(t, api+"/v1/chat/completions", "", stateChat); resp.StatusCode == 200 {
			ok++
		}
	}
	if ok != 1 {
		t.Fatalf("%d of 3 requests admitted on one API key whose request_burst is 1", ok)
	}
}

// httptestServer serves h on loopback for the test and returns its URL.
func httptestServer(t *testing.T, h http.Handler) string {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}
