package anthropic_test

import (
	"net/http"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/anthropic"
)

func TestFromEnv(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Fixed(http.StatusOK, okBody))
	call := func(p *anthropic.Provider, key string) http.Header {
		t.Helper()
		c := providertest.UserCall("m", llmclient.UserMessage("hi"))
		c.APIKey = key
		providertest.Exchange(t, p, c, false)
		return srv.Last(t).Header
	}
	tests := []struct {
		name             string
		env              map[string]string
		opts             []anthropic.Option
		poolKey          string
		apiKey, authzHdr string
	}{
		{"api key", map[string]string{anthropic.EnvAPIKey: "sk-ant-env", anthropic.EnvAuthToken: "tok"}, nil, "", "sk-ant-env", ""},
		{"auth token", map[string]string{anthropic.EnvAuthToken: "tok-env"}, nil, "", "", "Bearer tok-env"},
		{"auth token, pool key as bearer", map[string]string{anthropic.EnvAuthToken: "tok-env"}, nil, "pool-key", "", "Bearer pool-key"},
		{"empty api key falls back to the token", map[string]string{anthropic.EnvAPIKey: "", anthropic.EnvAuthToken: "tok-env"}, nil, "", "", "Bearer tok-env"},
		{"explicit key wins", map[string]string{anthropic.EnvAuthToken: "tok-env"}, []anthropic.Option{anthropic.WithAPIKey("sk-explicit")}, "", "sk-explicit", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(anthropic.EnvBaseURL, srv.URL)
			for _, k := range []string{anthropic.EnvAPIKey, anthropic.EnvAuthToken} {
				t.Setenv(k, tt.env[k])
			}
			p, err := anthropic.FromEnv(append([]anthropic.Option{anthropic.WithHTTPClient(srv.Client())}, tt.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			if p.BaseURL() != srv.URL {
				t.Errorf("BaseURL = %q, want %q", p.BaseURL(), srv.URL)
			}
			h := call(p, tt.poolKey)
			if h.Get("X-Api-Key") != tt.apiKey || h.Get("Authorization") != tt.authzHdr {
				t.Errorf("x-api-key %q, authorization %q; want %q, %q", h.Get("X-Api-Key"), h.Get("Authorization"), tt.apiKey, tt.authzHdr)
			}
		})
	}
}

func TestAuthTokenDialect(t *testing.T) {
	p, err := anthropic.New(anthropic.WithAuthToken("tok"))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"X-Api-Key": {"stale"}}
	p.Authorize(h, "")
	if h.Get("Authorization") != "Bearer tok" || h.Get("X-Api-Key") != "" {
		t.Errorf("Authorize: %v", h)
	}
}

func TestNewIgnoresEnvironment(t *testing.T) {
	t.Setenv(anthropic.EnvAPIKey, "sk-ant-env")
	p, err := anthropic.New()
	if err != nil {
		t.Fatal(err)
	}
	if e := providertest.CompleteError(t, p, providertest.UserCall("m", llmclient.UserMessage("hi"))); e.Class != failure.Auth {
		t.Errorf("New used the environment's key: %v", e)
	}
}
