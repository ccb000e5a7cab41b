package headers

import (
	"net/http"
	"time"
)

// RetryAfter reads the wait the server asked for. Precedence: retry-after-ms (OpenAI,
// Azure), then x-ms-retry-after-ms (Azure), then retry-after as delta-seconds (fractional
// accepted) or an HTTP-date taken relative to now. A header that is negative, unparsable or
// an HTTP-date already past is skipped in favour of the next one; when none is usable the
// result is (0, false). "0" is a valid answer, (0, true); the Client's Error cannot tell
// it from no header, and retries after its backoff either way. The result is not capped.
func RetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if d, ok := parseDecimal(Value(h, "Retry-After-Ms"), time.Millisecond); ok {
		return d, true
	}
	if d, ok := parseDecimal(Value(h, "X-Ms-Retry-After-Ms"), time.Millisecond); ok {
		return d, true
	}
	v := trimSpace(Value(h, "Retry-After"))
	if v == "" {
		return 0, false
	}
	if d, ok := parseDecimal(v, time.Second); ok {
		return d, true
	}
	t, err := http.ParseTime(v)
	if err != nil || t.Before(now) {
		return 0, false
	}
	return until(t, now), true
}

// ShouldRetry reads x-should-retry, the server's verdict on whether a retry can succeed.
// "true" and "false" (any case) set ok; an absent or other value reports ok=false.
func ShouldRetry(h http.Header) (retry bool, ok bool) {
	if h == nil {
		return false, false
	}
	v := trimSpace(Value(h, "X-Should-Retry"))
	switch {
	case equalFold(v, "true"):
		return true, true
	case equalFold(v, "false"):
		return false, true
	}
	return false, false
}
