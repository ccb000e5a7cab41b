package llmgateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmclient/llmclient/llmgateway"
)

const chatBodyMini = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`

// The caller's key is read from a Bearer Authorization header whatever the case of the
// scheme's name, and an Authorization header of another scheme does not hide an
// x-api-key. The admin token is read the same way.
func TestCallerKeyHeaders(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, "admin: {listen: 127.0.0.1:0, token_env: ADMIN_TOKEN}\n"))
	for _, hdr := range [][]string{
		{"Authorization", "Bearer gw-key-a"},
		{"Authorization", "bearer gw-key-a"},
		{"Authorization", "BEARER  gw-key-a "},
		{"Authorization", "Basic dXNlcjpwYXNz", "x-api-key", "gw-key-a"},
		{"api-key", "gw-key-a"},
	} {
		resp, body := post(t, g.api.URL+"/v1/chat/completions", "", chatBodyMini, hdr...)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%q: %d %s", hdr, resp.StatusCode, body)
		}
	}
	for _, hdr := range [][]string{
		{"Authorization", "Bearer"},
		{"Authorization", "Bearerx gw-key-a"},
		{"Authorization", "Basic Z3cta2V5LWE="},
	} {
		if resp, _ := post(t, g.api.URL+"/v1/chat/completions", "", chatBodyMini, hdr...); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%q: %d, want 401", hdr, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, g.admin.URL+"/admin/snapshot", nil)
	req.Header.Set("Authorization", "bearer admin-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("admin token with a lower-case scheme: %d", resp.StatusCode)
	}
	if strings.Contains(g.logs.String(), "gw-key-a") {
		t.Error("a key in the log")
	}
}

// Under open: true the callers without a key (or with one no tenant has) are one tenant,
// "-": tenant_limits and each_tenant budgets apply to them as to any tenant, and
// /admin/budgets lists their budget. They used to be no partition at all, so that a
// keyed tenant escaped its limits by dropping its key.
func TestOpenCallersAreATenantUnderLimitsAndBudgets(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, `
open: true
admin: {listen: 127.0.0.1:0, token_env: ADMIN_TOKEN}
limiter: {mode: fail_fast}
tenant_limits: {rpm: 1, request_burst: 1}
`))
	for _, c := range [][2]string{{"a tenant", "gw-key-a"}, {"no key", ""}, {"an unknown key", "not-a-key"}} {
		name, key := c[0], c[1]
		codes := []int{}
		for range 3 {
			resp, _ := post(t, g.api.URL+"/v1/chat/completions", key, chatBodyMini)
			codes = append(codes, resp.StatusCode)
		}
		if name == "an unknown key" {
			// The same tenant as "no key", whose one request a minute is spent.
			if codes[0] != http.StatusTooManyRequests {
				t.Errorf("%s: %v, want 429 from the first (the open tenant's request was spent)", name, codes)
			}
			continue
		}
		if codes[0] != http.StatusOK || codes[1] != http.StatusTooManyRequests || codes[2] != http.StatusTooManyRequests {
			t.Errorf("%s: %v, want 200 then 429s", name, codes)
		}
	}
	if !strings.Contains(g.logs.String(), `"tenant":"-"`) {
		t.Errorf("the open callers' tenant is not in the log:\n%s", g.logs.String())
	}

	// An each_tenant budget counts the open tenant's spend, and lists it.
	g2 := startGateway(t, baseConfig(oa, an, `
open: true
admin: {listen: 127.0.0.1:0, token_env: ADMIN_TOKEN}
budgets: [{name: each, scope: each_tenant, cap_usd: 0.000001}]
`))
	codes := []int{}
	for range 3 {
		resp, _ := post(t, g2.api.URL+"/v1/chat/completions", "", chatBodyMini)
		codes = append(codes, resp.StatusCode)
	}
	if codes[len(codes)-1] == http.StatusOK {
		t.Errorf("open callers past their each_tenant cap: %v", codes)
	}
	req, _ := http.NewRequest(http.MethodGet, g2.admin.URL+"/admin/budgets", nil)
	req.Header.Set("Authorization", "Bearer admin-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"tenant": "-"`) {
		t.Errorf("/admin/budgets does not list the open tenant:\n%s", b)
	}

	// No tenant may take the name.
	if _, err := llmgateway.Parse([]byte(baseConfig(oa, an, "")+"  - name: \"-\"\n    keys_env: [TENANT_C]\n    models: [\"*\"]\n"),
		env(append(append([]string{}, baseEnv...), "TENANT_C", "gw-key-c")...)); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("a tenant named -: %v", err)
	}
}

// x-llmclient-upstream and x-llmclient-attempts name what was tried: a refusal that no
// upstream saw (a drained upstream, the only one of the model) and an answer from the
// cache, one-shot or streamed, name neither.
func TestCallHeadersNameOnlyWhatWasTried(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, "admin: {listen: 127.0.0.1:0, token_env: ADMIN_TOKEN}\ncache: {enabled: true}\n"))
	check := func(what string, resp *http.Response, wantUpstream string) {
		t.Helper()
		up, n := resp.Header.Get("x-llmclient-upstream"), resp.Header.Get("x-llmclient-attempts")
		if up != wantUpstream || (wantUpstream == "") != (n == "") {
			t.Errorf("%s: upstream %q, attempts %q; want upstream %q", what, up, n, wantUpstream)
		}
	}
	for _, body := range []string{chatBodyMini, `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"a stream"}]}`} {
		resp, _ := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", body)
		check("the first call", resp, "oa")
		calls := oa.count()
		resp, _ = post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", body)
		if oa.count() != calls {
			t.Fatalf("not answered from the cache")
		}
		check("a cache hit", resp, "")
	}
	if code, body := admin(t, g, "POST", "/admin/upstreams/oa/drain", "admin-secret"); code != http.StatusOK {
		t.Fatalf("drain: %d %s", code, body)
	}
	resp, _ := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","messages":[{"role":"user","content":"new"}]}`)
	if resp.StatusCode == http.StatusOK {
		t.Fatal("served by a drained upstream")
	}
	check("a refusal no upstream saw", resp, "")
}
