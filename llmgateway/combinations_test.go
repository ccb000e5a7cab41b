package llmgateway_test

import (
	"net/http"
	"strings"
	"testing"
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
