package llmgateway_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmclient/llmclient/llmgateway"
)

// TestParseRefusesWhatTheClientRefuses: each file here is one llmclient.New refuses (a
// burst above its rate, a group none of whose upstreams serves its name, a quota scope
// named twice, more budgets than a Client takes, a backoff out of its range). Parse, which
// -check and every reload run, must refuse it too, with the reason: otherwise a reload
// reports only that the field needs a restart, and that restart fails.
func TestParseRefusesWhatTheClientRefuses(t *testing.T) {
	const up = "open: true\nupstreams: [{name: u, vendor: openai, base_url: 'http://127.0.0.1:1/v1'"
	for _, tc := range []struct{ name, yaml, want string }{
		{"upstream request_burst above rpm", up + ", limits: {rpm: 10, request_burst: 20}}]\n", "RequestBurst 20 exceeds RPM 10"},
		{"tenant_limits token_burst above tpm", auditMinimal + "tenant_limits: {tpm: 100, token_burst: 200}\n", "TokenBurst 200 exceeds TPM 100"},
		{"tenant's own limits", "upstreams: [{name: u, vendor: openai, base_url: 'http://127.0.0.1:1/v1'}]\ntenants: [{name: t, keys_env: [TENANT_A], models: ['*'], limits: {rpm: 1, request_burst: 2}}]\n", "RequestBurst 2 exceeds RPM 1"},
		{"quota scope request_burst above rpm", up + ", quota_scopes: [p]}]\nquota_scopes: [{name: p, limits: {rpm: 1, request_burst: 5}}]\n", "RequestBurst 5 exceeds RPM 1"},
		{"group its upstreams do not serve", up + ", models: {gpt-4o: gpt-4o}}]\ngroups: [{name: chat, upstreams: [u]}]\n", `none of its upstreams serves model "chat"`},
		{"quota scope named twice", up + ", quota_scopes: [p, p]}]\nquota_scopes: [{name: p, limits: {rpm: 10}}]\n", `quota scope "p" named twice`},
		{"65 budgets", auditMinimal + budgetsYAML(65), "65 budgets, at most 64"},
		{"backoff_initial above backoff_max", auditMinimal + "retry: {backoff_initial: 2s, backoff_max: 1s}\n", "backoff needs"},
		{"backoff_max over 24h", auditMinimal + "retry: {backoff_initial: 1s, backoff_max: 25h}\n", "backoff needs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := llmgateway.Parse([]byte(tc.yaml), env(baseEnv...))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse: %v, want an error saying %q", err, tc.want)
			}
		})
	}
	// At the bounds, the file is accepted and the Gateway builds.
	cfg, err := llmgateway.Parse([]byte(auditMinimal+budgetsYAML(64)+"tenant_limits: {rpm: 10, request_burst: 10}\nretry: {backoff_initial: 1s, backoff_max: 24h}\n"), env())
	if err != nil {
		t.Fatal(err)
	}
	g, err := llmgateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_ = g.Shutdown(t.Context())
}

// TestParseReportsTheClientsProblemsWithTheRest: what the Client refuses is reported in the
// same error as the file's own problems, all at once.
func TestParseReportsTheClientsProblemsWithTheRest(t *testing.T) {
	_, err := llmgateway.Parse([]byte(`
open: true
log: {level: loud}
upstreams:
  - {name: u, vendor: openai, base_url: 'http://127.0.0.1:1/v1', limits: {rpm: 10, request_burst: 20}, quota_scopes: [p, p]}
  - {name: v, vendor: cohere}
quota_scopes: [{name: p, limits: {rpm: 10}}]
tenant_limits: {tpm: 100, token_burst: 200}
retry: {backoff_initial: 2s, backoff_max: 1s}
`), env())
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"log.level", `vendor "cohere"`, "RequestBurst 20 exceeds RPM 10", "TokenBurst 200 exceeds TPM 100", `quota scope "p" named twice`, "backoff needs"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
}

// budgetsYAML is a budgets section of n client budgets.
func budgetsYAML(n int) string {
	var b strings.Builder
	b.WriteString("budgets:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: b%d, cap_usd: 10}\n", i)
	}
	return b.String()
}
