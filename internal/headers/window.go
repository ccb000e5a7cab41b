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

// MaxWindows is the most dimensions ReadWindows reads in one pass.
const MaxWindows = 4

// ReadWindows reads up to MaxWindows quota dimensions whose header names share prefix, in
// one pass over h: out[i] is dimension i, read from the headers prefix+names[i][0] (limit),
// prefix+names[i][1] (remaining) and prefix+names[i][2] (reset), all canonical. Counts must
// be non-negative decimals (a fraction is truncated); negative values, which some gateways
// send for "unknown", are ignored; a reset is any ParseReset form. Known is true when the
// limit or the remaining count parsed.
// A response without quota headers, as most self-hosted servers send, costs one walk over
// its few keys instead of a map lookup per name; one with them, one walk instead of
// three lookups per dimension. Dimensions beyond MaxWindows, or beyond len(out), are not
// read. A zero now means time.Now, read only once a header with the prefix was found: a
// response without quota headers then costs no clock reading.
func ReadWindows(h http.Header, prefix string, names [][3]string, now time.Time, out []Window) {
	n := min(len(names), len(out), MaxWindows)
	var vals [MaxWindows][3]string
	found := false
	for k, vs := range h {
		if len(vs) == 0 || len(k) <= len(prefix) || k[:len(prefix)] != prefix {
			continue
		}
		found = true
		suffix := k[len(prefix):]
		for i := range n {
			for j := range 3 {
				if names[i][j] == suffix {
					vals[i][j] = vs[0]
				}
			}
		}
	}
	if !found {
		clear(out[:n])
		return
	}
	if now.IsZero() {
		now = time.Now()
	}
	for i := range n {
		out[i] = parseWindow(vals[i][0], vals[i][1], vals[i][2], now)
	}
}

// parseWindow reads one dimension from its limit, remaining and reset values ("" when
// absent).
func parseWindow(limit, remaining, reset string, now time.Time) Window {
	var w Window
	if limit == "" && remaining == "" && reset == "" {
		return w
	}
	if v, ok := parseCount(limit); ok {
		w.Limit, w.Known = v, true
	}
	if v, ok := parseCount(remaining); ok {
		w.Remaining, w.Known = v, true
	}
	if d, ok := ParseReset(reset, now); ok {
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
