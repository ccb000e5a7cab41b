package llmclient_test

import (
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/provider/gemini"
)

// TestQuotaScopeValidation: New names every problem of the quota scopes and the
// per-quantity limits: an upstream naming an undeclared scope, a scope without a name or
// declared twice, an empty model pattern, negative ITPM and OTPM, on keys and scopes.
func TestQuotaScopeValidation(t *testing.T) {
	up := func(l llmclient.Limits, scopes ...string) llmclient.Option {
		return llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: fake.New(), Limits: l, QuotaScopes: scopes})
	}
	for _, c := range []struct {
		name string
		opts []llmclient.Option
		want string
	}{
		{"unknown scope", []llmclient.Option{up(llmclient.Limits{}, "project")}, `unknown quota scope "project"`},
		{"scope named twice", []llmclient.Option{up(llmclient.Limits{}, "p", "p"),
			llmclient.WithQuotaScope(llmclient.QuotaScope{Name: "p"})}, `quota scope "p" named twice`},
		{"empty name", []llmclient.Option{up(llmclient.Limits{}), llmclient.WithQuotaScope(llmclient.QuotaScope{})}, "quota scope: empty name"},
		{"declared twice", []llmclient.Option{up(llmclient.Limits{}), llmclient.WithQuotaScope(llmclient.QuotaScope{Name: "p"}),
			llmclient.WithQuotaScope(llmclient.QuotaScope{Name: "p"})}, `quota scope "p": declared twice`},
		{"empty model", []llmclient.Option{up(llmclient.Limits{}), llmclient.WithQuotaScope(llmclient.QuotaScope{Name: "p", Models: []string{""}})}, "empty model pattern"},
		{"negative ITPM", []llmclient.Option{up(llmclient.Limits{ITPM: -1})}, "negative ITPM -1"},
		{"negative OTPM", []llmclient.Option{up(llmclient.Limits{OTPM: -5})}, "negative OTPM -5"},
		{"scope limits", []llmclient.Option{up(llmclient.Limits{}, "p"),
			llmclient.WithQuotaScope(llmclient.QuotaScope{Name: "p", Limits: llmclient.Limits{ITPM: -2}})}, `quota scope "p": limits: negative ITPM -2`},
	} {
		_, err := llmclient.New(c.opts...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one containing %q", c.name, err, c.want)
		}
	}
	if _, err := llmclient.New(up(llmclient.Limits{ITPM: 1 << 40, OTPM: 1}, "p"),
		llmclient.WithQuotaScope(llmclient.QuotaScope{Name: "p", Models: []string{"claude-opus-4*"}, Limits: llmclient.Limits{RPM: 5, OTPM: 8_000}})); err != nil {
		t.Errorf("valid scope and quantities: %v", err)
	}
}

// TestProviderQuotaRules: the adapters say how their vendor meters its token quotas.
func TestProviderQuotaRules(t *testing.T) {
	a, err := anthropic.New(anthropic.WithAPIKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := gemini.New(gemini.WithAPIKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	if r := a.QuotaRule(); !r.OutputOnUsage || !r.CacheReadsFree || r.InputOnly {
		t.Errorf("anthropic: %+v", r)
	}
	if r := g.QuotaRule(); !r.InputOnly || r.OutputOnUsage || r.CacheReadsFree {
		t.Errorf("gemini: %+v", r)
	}
}
