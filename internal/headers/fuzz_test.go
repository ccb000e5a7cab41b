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
