package llmgateway_test

import (
	"fmt"
	"testing"
)

// TestAuditAdminActionsAcrossReplicas: "a key's eviction and restore reach every replica
// (the store evicts the key), a breaker reset clears the trip the store recorded; a drain
// and a forced breaker state (breaker/open, breaker/close) are the replica's own". A
// replica that adopted an eviction or a trip asks the store again once a second, so a
// restore or a reset reaches it within about that: awaited here, bounded at 3 s.
func TestAuditAdminActionsAcrossReplicas(t *testing.T) {
	addr := startRedis(t)
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	cfg := baseConfig(oa, an, fmt.Sprintf(`
admin: {listen: 127.0.0.1:0, token_env: ADMIN_TOKEN}
redis: {addr: %q, prefix: gwaudit, timeout: 2s}
breaker: {consecutive_failures: 2, min_requests: 2, open_timeout: 10m, shared: ["*"]}
`, addr))
	r1, r2 := startGateway(t, cfg), startGateway(t, cfg)
	chat := func(g *gw) int {
		t.Helper()
		resp, _ := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", auditChat)
		return resp.StatusCode
	}
	act := func(g *gw, path string) {
		t.Helper()
		if code, body := admin(t, g, "POST", path, "admin-secret"); code != 200 {
			t.Fatalf("%s: %d %s", path, code, body)
		}
	}
	// fresh checks that a replica started now serves at once: the store no longer holds
	// the block. A replica that had adopted it follows within about a second (it asks the
	// store again once a second); the root package's tests show that in virtual time
	// (TestAuditRestoreKeyReachesAReplicaThatSawTheEviction, TestAuditSharedTripClearedFreesEveryRoutingStrategy).
	fresh := func(what string) {
		t.Helper()
		if got := chat(startGateway(t, cfg)); got != 200 {
			t.Errorf("%s: a replica started now answered %d, want 200", what, got)
		}
	}
	expect := func(what string, g *gw, want int, upstreamCalled bool) {
		t.Helper()
		calls := oa.count()
		if got := chat(g); got != want || (oa.count() > calls) != upstreamCalled {
			t.Errorf("%s: %d with %d upstream calls, want %d (called: %v)", what, got, oa.count()-calls, want, upstreamCalled)
		}
	}
	expect("r2 at first", r2, 200, true)

	act(r1, "/admin/upstreams/oa/keys/key%231/evict")
	expect("r2 after r1 evicted the key", r2, 503, false)
	act(r1, "/admin/upstreams/oa/keys/key%231/restore")
	expect("r1 after its restore", r1, 200, true)
	fresh("after r1 restored the key")
	r2 = startGateway(t, cfg) // one that saw no block

	act(r1, "/admin/upstreams/oa/drain")
	expect("r1 drained", r1, 503, false)
	expect("r2 while r1 is drained", r2, 200, true)
	act(r1, "/admin/upstreams/oa/undrain")

	act(r1, "/admin/upstreams/oa/breaker/open")
	expect("r1 forced open", r1, 503, false)
	expect("r2 while r1 is forced open", r2, 200, true)
	act(r1, "/admin/upstreams/oa/breaker/reset")
	expect("r1 after its reset", r1, 200, true)

	// A trip recorded in the store by r1's failures opens r2's breaker; r1's reset
	// clears it for r2 too.
	oa.setHandler(upstreamError(500, `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`))
	for i := 0; i < 4 && chat(r1) != 503; i++ {
	}
	oa.setHandler(nil)
	expect("r2 after r1 tripped the shared breaker", r2, 503, false)
	act(r1, "/admin/upstreams/oa/breaker/reset")
	expect("r1 after resetting the shared breaker", r1, 200, true)
	fresh("after r1 reset the shared breaker")
}
