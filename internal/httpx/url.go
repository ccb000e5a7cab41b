package httpx

import "strings"

// JoinURL joins a base URL and a path with exactly one slash between them:
// JoinURL("https://api.openai.com/v1/", "/chat/completions") is
// "https://api.openai.com/v1/chat/completions". An empty path returns base unchanged.
func JoinURL(base, path string) string {
	if path == "" {
		return base
	}
	return strings.TrimRight(base, "/") + "/" + strings.TrimLeft(path, "/")
}
