package openai_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/llmclient/llmclient/provider/openai"
	"github.com/llmclient/llmclient/ratelimit"
)

func TestParseRateLimits(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	tests := []struct {
		name string
		h    http.Header
		want *ratelimit.Status
	}{
		{"none", h("Content-Type", "application/json"), nil},
		{"nil", nil, nil},
		{"openai full", h(
			"x-ratelimit-limit-requests", "10000", "x-ratelimit-remaining-requests", "9998", "x-ratelimit-reset-requests", "12ms",
			"x-ratelimit-limit-tokens", "2000000", "x-ratelimit-remaining-tokens", "1999000", "x-ratelimit-reset-tokens", "6m0s"),
			&ratelimit.Status{
				Requests: ratelimit.Window{Known: true, Limit: 10000, Remaining: 9998, Reset: 12 * time.Millisecond},
				Tokens:   ratelimit.Window{Known: true, Limit: 2000000, Remaining: 1999000, Reset: 6 * time.Minute},
			}},
		{"reset 1s", h("x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "1s"),
			&ratelimit.Status{Requests: ratelimit.Window{Known: true, Reset: time.Second}}},
		{"groq fractional resets", h("x-ratelimit-limit-requests", "14400", "x-ratelimit-remaining-requests", "14370", "x-ratelimit-reset-requests", "2m59.56s",
			"x-ratelimit-limit-tokens", "18000", "x-ratelimit-remaining-tokens", "17997", "x-ratelimit-reset-tokens", "7.66s"),
			&ratelimit.Status{
				Requests: ratelimit.Window{Known: true, Limit: 14400, Remaining: 14370, Reset: 2*time.Minute + 59560*time.Millisecond},
				Tokens:   ratelimit.Window{Known: true, Limit: 18000, Remaining: 17997, Reset: 7660 * time.Millisecond},
			}},
		{"azure remaining only", h("x-ratelimit-remaining-requests", "99", "x-ratelimit-remaining-tokens", "119000"),
			&ratelimit.Status{
				Requests: ratelimit.Window{Known: true, Remaining: 99},
				Tokens:   ratelimit.Window{Known: true, Remaining: 119000},
			}},
		{"azure responses -1 ignored", h("x-ratelimit-remaining-requests", "-1", "x-ratelimit-remaining-tokens", "-1"), nil},
		{"openrouter generic trio", h("X-RateLimit-Limit", "20", "X-RateLimit-Remaining", "19", "X-RateLimit-Reset", "1772366430500"),
			&ratelimit.Status{Requests: ratelimit.Window{Known: true, Limit: 20, Remaining: 19, Reset: 30500 * time.Millisecond}}},
		{"garbage values", h("x-ratelimit-limit-requests", "many", "x-ratelimit-reset-requests", "soon"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := openai.ParseRateLimits(tt.h, now)
			switch {
			case tt.want == nil && got != nil:
				t.Fatalf("got %+v; want nil", got)
			case tt.want != nil && (got == nil || *got != *tt.want):
				t.Fatalf("got %+v; want %+v", got, tt.want)
			}
		})
	}
}

// Every quota header RateLimits reads is one RateLimitHeader names, and a header map in
// which no name RateLimitHeader names has a value gives no status.
func TestRateLimitHeaderNamesWhatRateLimitsReads(t *testing.T) {
	p, err := openai.New(openai.WithBaseURL("http://api.test/v1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dim := range []string{"Requests", "Tokens"} {
		for _, part := range []string{"Limit", "Remaining", "Reset"} {
			for _, name := range []string{"X-Ratelimit-" + part + "-" + dim, "X-Ratelimit-" + part} {
				if !p.RateLimitHeader(name) {
					t.Errorf("RateLimitHeader(%q) = false", name)
				}
				if part != "Reset" && p.RateLimits(http.Header{name: {"7"}}) == nil {
					t.Errorf("RateLimits does not read %q", name)
				}
			}
		}
	}
	for _, name := range []string{"Content-Type", "X-Ratelimit-", "X-Ratelimit", "Ratelimit-Remaining", "X-Request-Id", ""} {
		if p.RateLimitHeader(name) {
			t.Errorf("RateLimitHeader(%q) = true", name)
		}
	}
}

func FuzzRateLimitHeader(f *testing.F) {
	f.Add("X-Ratelimit-Remaining-Requests", "0", "Content-Type", "application/json")
	f.Add("X-Ratelimit-Reset", "1700000000000", "X-Ratelimit-Limit", "10")
	f.Add("X-Ratelimit-", "5", "Retry-After", "1")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		p, err := openai.New(openai.WithBaseURL("http://api.test/v1"))
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{k1: {v1}, k2: {v2}, "Content-Type": {"application/json"}}
		named := false
		for k, vs := range h {
			named = named || len(vs) > 0 && p.RateLimitHeader(k)
		}
		if !named && p.RateLimits(h) != nil {
			t.Fatalf("RateLimits(%v) reports a status, and RateLimitHeader names none of its keys", h)
		}
	})
}
