package httpx

import (
	"errors"
	"net/url"
	"strings"
)

// JoinURL joins a base URL and a path with exactly one slash between them:
// JoinURL("https://api.openai.com/v1/", "/chat/completions") is
// "https://api.openai.com/v1/chat/completions". An empty path returns base unchanged.
func JoinURL(base, path string) string {
	if path == "" {
		return base
	}
	return strings.TrimRight(base, "/") + "/" + strings.TrimLeft(path, "/")
}

// CheckBaseURL accepts an absolute http or https URL without query, fragment or user info.
// Its error never echoes the URL, which may then hold a secret, and carries no package
// prefix (the adapter adds its own): "base URL: …".
func CheckBaseURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return errors.New("base URL: want an absolute http or https URL")
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return errors.New("base URL: must not contain a query, fragment or user info")
	}
	return nil
}
