package openai_test

import (
	"strings"
	"testing"

	"github.com/llmclient/llmclient/provider/openai"
)

func TestFromEnv(t *testing.T) {
	u := newUpstream(t, reply{Body: okBody})
	t.Setenv(openai.EnvAPIKey, "sk-env-123")
	t.Setenv(openai.EnvBaseURL, u.URL+"/v1")
	t.Setenv(openai.EnvOrgID, "org-env")
	t.Setenv(openai.EnvProjectID, "proj_env")
	p, err := openai.FromEnv(openai.WithHTTPClient(u.Client()))
	if err != nil {
		t.Fatal(err)
	}
	if p.BaseURL() != u.URL+"/v1" {
		t.Errorf("BaseURL = %q", p.BaseURL())
	}
	if _, err := p.Complete(t.Context(), simpleCall("gpt-4o")); err != nil {
		t.Fatal(err)
	}
	h := u.Last(t).Header
	if h.Get("Authorization") != "Bearer sk-env-123" || h.Get("OpenAI-Organization") != "org-env" || h.Get("OpenAI-Project") != "proj_env" {
		t.Errorf("headers %v", h)
	}

	// Explicit options win over the environment.
	p, err = openai.FromEnv(openai.WithHTTPClient(u.Client()), openai.WithAPIKey("sk-explicit"), openai.WithOrganization("org-x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Complete(t.Context(), simpleCall("gpt-4o")); err != nil {
		t.Fatal(err)
	}
	if h := u.Last(t).Header; h.Get("Authorization") != "Bearer sk-explicit" || h.Get("OpenAI-Organization") != "org-x" {
		t.Errorf("explicit options lost: %v", h)
	}
}

func TestFromEnvEmptyAndInvalid(t *testing.T) {
	t.Setenv(openai.EnvAPIKey, "")
	t.Setenv(openai.EnvBaseURL, "")
	p, err := openai.FromEnv()
	if err != nil || p.BaseURL() != openai.DefaultBaseURL {
		t.Fatalf("empty variables: %v, %v", p, err)
	}
	t.Setenv(openai.EnvBaseURL, "ftp://example.com")
	if _, err := openai.FromEnv(); err == nil || !strings.HasPrefix(err.Error(), "openai: base URL") {
		t.Errorf("invalid OPENAI_BASE_URL: %v", err)
	}
	t.Setenv(openai.EnvBaseURL, "")
	t.Setenv(openai.EnvAPIKey, "sk-bad\nkey")
	if _, err := openai.FromEnv(); err == nil || strings.Contains(err.Error(), "sk-bad") {
		t.Errorf("invalid OPENAI_API_KEY: %v", err)
	}
}

// TestNewIgnoresEnvironment checks that New itself never reads the environment.
func TestNewIgnoresEnvironment(t *testing.T) {
	u := newUpstream(t, reply{Body: okBody})
	t.Setenv(openai.EnvAPIKey, "sk-env-123")
	t.Setenv(openai.EnvBaseURL, "http://127.0.0.1:1/v1")
	p := newProvider(t, u)
	if _, err := p.Complete(t.Context(), simpleCall("gpt-4o")); err != nil {
		t.Fatal(err)
	}
	if h := u.Last(t).Header.Get("Authorization"); h != "" {
		t.Errorf("New used the environment's key: %q", h)
	}
}
