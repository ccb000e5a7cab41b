package openai

import "os"

// The environment variables FromEnv reads, as the official openai-go SDK does.
const (
	EnvAPIKey    = "OPENAI_API_KEY"
	EnvBaseURL   = "OPENAI_BASE_URL"
	EnvOrgID     = "OPENAI_ORG_ID"
	EnvProjectID = "OPENAI_PROJECT_ID"
)

// FromEnv returns a Provider configured from the environment as the official openai-go
// SDK is: OPENAI_API_KEY (WithAPIKey), OPENAI_BASE_URL (WithBaseURL), OPENAI_ORG_ID
// (WithOrganization) and OPENAI_PROJECT_ID (WithProject). A variable that is unset or
// empty is left out. opts are applied after the environment, so an explicit option
// overrides the variable of the same setting. FromEnv reads the environment once, when it
// is called; New never reads it. Errors are New's.
func FromEnv(opts ...Option) (*Provider, error) {
	return New(append(envOptions(os.LookupEnv), opts...)...)
}

func envOptions(lookup func(string) (string, bool)) []Option {
	var out []Option
	set := func(name string, opt func(string) Option) {
		if v, ok := lookup(name); ok && v != "" {
			out = append(out, opt(v))
		}
	}
	set(EnvBaseURL, WithBaseURL)
	set(EnvAPIKey, WithAPIKey)
	set(EnvOrgID, WithOrganization)
	set(EnvProjectID, WithProject)
	return out
}
