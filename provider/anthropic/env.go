package anthropic

import "os"

// The environment variables FromEnv reads, as the official anthropic-sdk-go does.
const (
	EnvAPIKey    = "ANTHROPIC_API_KEY"
	EnvAuthToken = "ANTHROPIC_AUTH_TOKEN"
	EnvBaseURL   = "ANTHROPIC_BASE_URL"
)

// FromEnv returns a Provider configured from the environment as the official
// anthropic-sdk-go is: ANTHROPIC_BASE_URL (WithBaseURL), and ANTHROPIC_API_KEY
// (WithAPIKey) or, when that is unset or empty, ANTHROPIC_AUTH_TOKEN (WithAuthToken:
// credentials are then sent as "Authorization: Bearer"). A variable that is unset or
// empty is left out. opts are applied after the environment, so an explicit option
// overrides the variable of the same setting. FromEnv reads the environment once, when
// it is called; New never reads it. Errors are New's.
func FromEnv(opts ...Option) (*Provider, error) {
	return New(append(envOptions(os.LookupEnv), opts...)...)
}

func envOptions(lookup func(string) (string, bool)) []Option {
	var out []Option
	if v, ok := lookup(EnvBaseURL); ok && v != "" {
		out = append(out, WithBaseURL(v))
	}
	if v, ok := lookup(EnvAPIKey); ok && v != "" {
		out = append(out, WithAPIKey(v))
	} else if v, ok := lookup(EnvAuthToken); ok && v != "" {
		out = append(out, WithAuthToken(v))
	}
	return out
}
