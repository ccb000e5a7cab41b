package headers

import (
	"net/http"
	"time"
)

// Window is one quota dimension read from response headers (requests or tokens).
// The zero value means nothing was reported.
type Window struct {
	// Known is true when the limit or the remaining count parsed.
	Known bool
	// Limit and Remaining are the window's size and what is left; 0 when not reported.
	Limit, Remaining int64
	// Reset is how long until the window is replenished, relative to now; 0 when not reported.
	Reset time.Duration
}

// ReadWindow reads one quota dimension from three headers, named in canonical form:
// limit, remaining and reset (any ParseReset form). Counts must be non-negative decimals (a fraction is truncated);
// negative values, which some gateways send for "unknown", are ignored. Known is true when
// the limit or the remaining count parsed.
func ReadWindow(h http.Header, limitKey, remainingKey, resetKey string, now time.Time) Window {
	var w Window
	if h == nil {
		return w
	}
	if v, ok := parseCount(Value(h, limitKey)); ok {
		w.Limit, w.Known = v, true
	}
	if v, ok := parseCount(Value(h, remainingKey)); ok {
		w.Remaining, w.Known = v, true
	}
	if d, ok := ParseReset(Value(h, resetKey), now); ok {
		w.Reset = d
	}
	return w
}

// parseCount reads a non-negative count, truncating any fraction ("100.0") and
// saturating at the largest int64.
func parseCount(s string) (int64, bool) {
	s = trimSpace(s)
	d, ok := parseDecimal(s, 1)
	return int64(d), ok
}
