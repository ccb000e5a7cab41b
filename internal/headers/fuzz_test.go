package headers_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/llmclient/llmclient/internal/headers"
)

func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"", "0", "20", "0.5", "-1", "1e3", "Sun, 01 Mar 2026 12:00:42 GMT", "later", "99999999999999999999"} {
		f.Add(s, "", "")
		f.Add("", s, "")
		f.Add("", "", s)
	}
	f.Add("1500", "900", "30")
	f.Fuzz(func(t *testing.T, ms, xms, ra string) {
		h := http.Header{}
		h.Set("retry-after-ms", ms)
		h.Set("x-ms-retry-after-ms", xms)
		h.Set("retry-after", ra)
		d, ok := headers.RetryAfter(h, now)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("RetryAfter(%q, %q, %q) = %v, %v", ms, xms, ra, d, ok)
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"6m0s", "1s", "12ms", "1h2m3.5s", "0.5s", "20", "0.5", "250µs", "-1s", "1e3", ".", "9999999999999h", "1.5.5s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := headers.ParseDuration(s)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("ParseDuration(%q) = %v, %v", s, d, ok)
		}
		// Where the standard library accepts a non-negative duration that fits, agree with it.
		if want, err := time.ParseDuration(s); err == nil && want >= 0 && ok && s != "" && s[0] != '+' && d != want {
			t.Fatalf("ParseDuration(%q) = %v; time.ParseDuration says %v", s, d, want)
		}
	})
}

func FuzzParseReset(f *testing.F) {
	for _, s := range []string{"6m0s", "12ms", "20", "2026-03-01T12:00:30Z", "2026-03-01T11:00:00Z", "1772366430", "1772366430500", "tomorrow", "-5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := headers.ParseReset(s, now)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("ParseReset(%q) = %v, %v", s, d, ok)
		}
	})
}

func FuzzRetryHint(f *testing.F) {
	for _, s := range []string{
		"Please try again in 634ms.", "try again in 6m0s", "Please retry in 10.68s.",
		"Please retry after 37 seconds.", "retry after 20 seconds", "try again later", "retry in -5s",
		"try again in 99999999999999999999 hours",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := headers.RetryHint(s)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("RetryHint(%q) = %v, %v", s, d, ok)
		}
	})
}

// FuzzReadWindowsMatchesReadWindow checks that the one-pass reader finds what three
// lookups per dimension find, whatever else the response carries.
func FuzzReadWindowsMatchesReadWindow(f *testing.F) {
	f.Add("100", "99", "1s", "7", "", "6m0s", "other", "x")
	f.Add("", "", "", "-1", "12.5", "1772366430500", "X-Ratelimit-Limitx", "5")
	f.Add("many", "0", "soon", "", "3", "", "Content-Type", "application/json")
	names := [][3]string{{"Limit-Requests", "Remaining-Requests", "Reset-Requests"}, {"Limit", "Remaining", "Reset"}}
	f.Fuzz(func(t *testing.T, l1, r1, s1, l2, r2, s2, otherKey, otherValue string) {
		h := http.Header{}
		for _, kv := range [][2]string{
			{"X-Ratelimit-Limit-Requests", l1}, {"X-Ratelimit-Remaining-Requests", r1}, {"X-Ratelimit-Reset-Requests", s1},
			{"X-Ratelimit-Limit", l2}, {"X-Ratelimit-Remaining", r2}, {"X-Ratelimit-Reset", s2},
		} {
			if kv[1] != "" {
				h[kv[0]] = []string{kv[1], "ignored second value"}
			}
		}
		if otherKey != "" {
			h[otherKey] = append(h[otherKey], otherValue) // may be any key, canonical or not
		}
		h["X-Ratelimit-Empty"] = nil
		var got [2]headers.Window
		headers.ReadWindows(h, "X-Ratelimit-", names, now, got[:])
		for i, n := range names {
			want := headers.ReadWindow(h, "X-Ratelimit-"+n[0], "X-Ratelimit-"+n[1], "X-Ratelimit-"+n[2], now)
			if got[i] != want {
				t.Fatalf("dimension %d: ReadWindows %+v, ReadWindow %+v (headers %v)", i, got[i], want, h)
			}
		}
	})
}
