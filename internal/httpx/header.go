package httpx

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ValidHeaderName reports whether k is a valid HTTP header field name (an RFC 9110 token).
func ValidHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

// ValidHeaderValue reports whether v may be sent as an HTTP header value: no control
// characters other than tab. An API key that fails it must not be sent.
func ValidHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// CheckHeader checks the names and first values of h, a WithHeader option's headers. Its
// error names the header but never echoes a value, and carries no package prefix (the
// adapter adds its own): "WithHeader: invalid header name …" or "WithHeader: invalid value
// for header …".
func CheckHeader(h http.Header) error {
	for k, v := range h {
		if !ValidHeaderName(k) {
			return fmt.Errorf("WithHeader: invalid header name %q", k)
		}
		if !ValidHeaderValue(v[0]) {
			return fmt.Errorf("WithHeader: invalid value for header %q", k)
		}
	}
	return nil
}

// errKeyInHeader is CheckAPIKey's error.
var errKeyInHeader = errors.New("WithAPIKey: key contains characters not allowed in a header")

// CheckAPIKey checks that a WithAPIKey key can be sent in a header. Its error does not echo
// the key and carries no package prefix.
func CheckAPIKey(key string) error {
	if !ValidHeaderValue(key) {
		return errKeyInHeader
	}
	return nil
}
