package gemini_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/gemini"
)

var geminiEnv = []string{gemini.EnvGoogleAPIKey, gemini.EnvGeminiAPIKey, gemini.EnvBaseURL, gemini.EnvUseVertexAI,
	gemini.EnvCloudProject, gemini.EnvCloudLocation, gemini.EnvCloudRegion, gemini.EnvVertexBaseURL}

func setEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, k := range geminiEnv {
		t.Setenv(k, env[k])
	}
}

func TestFromEnv(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Fixed(http.StatusOK, okBody))
	tests := []struct {
		name     string
		env      map[string]string
		opts     []gemini.Option
		path     string
		goog     string
		bearer   string
		newError string
	}{
		{name: "gemini key", env: map[string]string{gemini.EnvGeminiAPIKey: "AIza-gemini"},
			path: "/v1beta/models/m:generateContent", goog: "AIza-gemini"},
		{name: "google key wins", env: map[string]string{gemini.EnvGeminiAPIKey: "AIza-gemini", gemini.EnvGoogleAPIKey: "AIza-google"},
			path: "/v1beta/models/m:generateContent", goog: "AIza-google"},
		{name: "explicit key wins", env: map[string]string{gemini.EnvGoogleAPIKey: "AIza-google"}, opts: []gemini.Option{gemini.WithAPIKey("AIza-explicit")},
			path: "/v1beta/models/m:generateContent", goog: "AIza-explicit"},
		{name: "vertex", env: map[string]string{gemini.EnvUseVertexAI: "True", gemini.EnvCloudProject: "proj", gemini.EnvCloudRegion: "europe-west4", gemini.EnvGoogleAPIKey: "AIza-ignored"},
			opts: []gemini.Option{gemini.WithAPIKey("ya29.token")},
			path: "/v1/projects/proj/locations/europe-west4/publishers/google/models/m:generateContent", bearer: "Bearer ya29.token"},
		{name: "vertex without project", env: map[string]string{gemini.EnvUseVertexAI: "1", gemini.EnvCloudLocation: "us-central1"},
			newError: "project and location must be plain names"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{gemini.EnvBaseURL: srv.URL, gemini.EnvVertexBaseURL: srv.URL}
			for k, v := range tt.env {
				env[k] = v
			}
			setEnv(t, env)
			p, err := gemini.FromEnv(append([]gemini.Option{gemini.WithHTTPClient(srv.Client())}, tt.opts...)...)
			if tt.newError != "" {
				if err == nil || !strings.Contains(err.Error(), tt.newError) {
					t.Fatalf("FromEnv error = %v, want %q", err, tt.newError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			providertest.Exchange(t, p, providertest.UserCall("m", llmclient.UserMessage("hi")), false)
			got := srv.Last(t)
			if got.Path != tt.path || got.Header.Get("X-Goog-Api-Key") != tt.goog || got.Header.Get("Authorization") != tt.bearer {
				t.Errorf("request %s, x-goog-api-key %q, authorization %q", got.Path, got.Header.Get("X-Goog-Api-Key"), got.Header.Get("Authorization"))
			}
		})
	}
}

func TestNewIgnoresEnvironment(t *testing.T) {
	setEnv(t, map[string]string{gemini.EnvGoogleAPIKey: "AIza-env"})
	p, err := gemini.New()
	if err != nil {
		t.Fatal(err)
	}
	if e := providertest.CompleteError(t, p, providertest.UserCall("m", llmclient.UserMessage("hi"))); e.Class != failure.Auth {
		t.Errorf("New used the environment's key: %v", e)
	}
}
