package gemini

import (
	"os"
	"strings"
)

// The environment variables FromEnv reads, as Google's Gen AI SDK (google.golang.org/genai)
// does.
const (
	EnvGoogleAPIKey  = "GOOGLE_API_KEY"
	EnvGeminiAPIKey  = "GEMINI_API_KEY"
	EnvBaseURL       = "GOOGLE_GEMINI_BASE_URL"
	EnvUseVertexAI   = "GOOGLE_GENAI_USE_VERTEXAI"
	EnvCloudProject  = "GOOGLE_CLOUD_PROJECT"
	EnvCloudLocation = "GOOGLE_CLOUD_LOCATION"
	EnvCloudRegion   = "GOOGLE_CLOUD_REGION"
	EnvVertexBaseURL = "GOOGLE_VERTEX_BASE_URL"
)

// FromEnv returns a Provider configured from the environment as the Gen AI SDK is.
//
// For the Gemini API: the key is GOOGLE_API_KEY or, when that is unset or empty,
// GEMINI_API_KEY (the SDK prefers GOOGLE_API_KEY when both are set), and the base URL
// GOOGLE_GEMINI_BASE_URL. When GOOGLE_GENAI_USE_VERTEXAI is "1" or "true" (any case), the
// Provider targets Vertex AI instead (WithVertex) with GOOGLE_CLOUD_PROJECT and
// GOOGLE_CLOUD_LOCATION (else GOOGLE_CLOUD_REGION), and base URL GOOGLE_VERTEX_BASE_URL;
// Vertex AI takes OAuth access tokens, which no variable carries, so its credential
// comes from the upstream's Keys or an explicit WithAPIKey. A variable that is unset or
// empty is left out. opts are applied after the environment, so an explicit option
// overrides the variable of the same setting. FromEnv reads the environment once, when it
// is called; New never reads it. Errors are New's (WithVertex without a project or
// location, a malformed base URL).
func FromEnv(opts ...Option) (*Provider, error) {
	return New(append(envOptions(os.LookupEnv), opts...)...)
}

func envOptions(lookup func(string) (string, bool)) []Option {
	get := func(name string) string {
		v, _ := lookup(name)
		return v
	}
	var out []Option
	if v := strings.ToLower(get(EnvUseVertexAI)); v == "1" || v == "true" {
		loc := get(EnvCloudLocation)
		if loc == "" {
			loc = get(EnvCloudRegion)
		}
		out = append(out, WithVertex(get(EnvCloudProject), loc))
		if u := get(EnvVertexBaseURL); u != "" {
			out = append(out, WithBaseURL(u))
		}
		return out
	}
	key := get(EnvGoogleAPIKey)
	if key == "" {
		key = get(EnvGeminiAPIKey)
	}
	if key != "" {
		out = append(out, WithAPIKey(key))
	}
	if u := get(EnvBaseURL); u != "" {
		out = append(out, WithBaseURL(u))
	}
	return out
}
