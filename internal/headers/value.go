package headers

import "net/http"

// Value returns the first value of the header key, which must be in canonical form (as
// http.CanonicalHeaderKey returns it, such as "X-Ratelimit-Remaining-Tokens"). It is
// http.Header.Get without canonicalizing the key on every call: net/http stores
// canonical keys, so a constant canonical key finds the same value, several times
// faster.
func Value(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
