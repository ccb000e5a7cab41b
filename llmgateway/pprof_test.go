package llmgateway_test

import (
	"strings"
	"testing"
)

// The admin listener serves Go's profiles of the running gateway, with the admin
// token only.
func TestAdminServesProfilesWithTheTokenOnly(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, "admin: {listen: 127.0.0.1:0, token_env: ADMIN_TOKEN}\n"))
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=1"} {
		if code, _ := admin(t, g, "GET", p, ""); code != 401 {
			t.Fatalf("%s without a token: %d", p, code)
		}
		if code, _ := admin(t, g, "GET", p, "gw-key-a"); code != 401 {
			t.Fatalf("%s with a tenant key: %d", p, code)
		}
	}
	if code, body := admin(t, g, "GET", "/debug/pprof/", "admin-secret"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Fatalf("index: %d %.200s", code, body)
	}
	if code, body := admin(t, g, "GET", "/debug/pprof/heap?debug=1", "admin-secret"); code != 200 || !strings.Contains(body, "heap profile") {
		t.Fatalf("heap: %d %.200s", code, body)
	}
}
