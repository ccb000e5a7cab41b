package headers_test

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/llmclient/llmclient/internal/headers"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const maxDur = time.Duration(math.MaxInt64)

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		name string
		h    http.Header
		want time.Duration
		ok   bool
	}{
		{"absent", hdr(), 0, false},
		{"nil header", nil, 0, false},
		{"retry-after-ms", hdr("retry-after-ms", "1500"), 1500 * time.Millisecond, true},
		{"retry-after-ms fractional", hdr("retry-after-ms", "12.5"), 12500 * time.Microsecond, true},
		{"retry-after-ms wins over retry-after", hdr("retry-after-ms", "200", "retry-after", "30"), 200 * time.Millisecond, true},
		{"retry-after-ms wins over x-ms", hdr("retry-after-ms", "200", "x-ms-retry-after-ms", "900"), 200 * time.Millisecond, true},
		{"x-ms-retry-after-ms (Azure)", hdr("x-ms-retry-after-ms", "900"), 900 * time.Millisecond, true},
		{"x-ms wins over retry-after", hdr("x-ms-retry-after-ms", "900", "retry-after", "30"), 900 * time.Millisecond, true},
		{"negative ms falls through", hdr("retry-after-ms", "-5", "retry-after", "3"), 3 * time.Second, true},
		{"garbage ms falls through", hdr("retry-after-ms", "soon", "retry-after", "3"), 3 * time.Second, true},
		{"retry-after seconds", hdr("retry-after", "20"), 20 * time.Second, true},
		{"retry-after zero", hdr("retry-after", "0"), 0, true},
		{"retry-after fractional", hdr("retry-after", "0.5"), 500 * time.Millisecond, true},
		{"retry-after blanks", hdr("retry-after", " 7 "), 7 * time.Second, true},
		{"retry-after negative", hdr("retry-after", "-1"), 0, false},
		{"retry-after exponent rejected", hdr("retry-after", "1e3"), 0, false},
		{"retry-after NaN rejected", hdr("retry-after", "NaN"), 0, false},
		{"retry-after http date", hdr("retry-after", "Sun, 01 Mar 2026 12:00:42 GMT"), 42 * time.Second, true},
		{"retry-after http date now", hdr("retry-after", "Sun, 01 Mar 2026 12:00:00 GMT"), 0, true},
		{"retry-after http date past", hdr("retry-after", "Sun, 01 Mar 2026 11:59:00 GMT"), 0, false},
		{"retry-after RFC 850 date", hdr("retry-after", "Sunday, 01-Mar-26 12:01:00 GMT"), time.Minute, true},
		{"retry-after garbage", hdr("retry-after", "later"), 0, false},
		{"retry-after huge saturates", hdr("retry-after", "99999999999999999999999"), maxDur, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := headers.RetryAfter(tt.h, now)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("RetryAfter = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestShouldRetry(t *testing.T) {
	tests := []struct {
		value     string
		set       bool
		retry, ok bool
	}{
		{"", false, false, false},
		{"true", true, true, true},
		{"false", true, false, true},
		{"TRUE", true, true, true},
		{" False ", true, false, true},
		{"yes", true, false, false},
		{"1", true, false, false},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.set {
			h.Set("x-should-retry", tt.value)
		}
		retry, ok := headers.ShouldRetry(h)
		if retry != tt.retry || ok != tt.ok {
			t.Errorf("ShouldRetry(%q) = %v, %v; want %v, %v", tt.value, retry, ok, tt.retry, tt.ok)
		}
	}
	if _, ok := headers.ShouldRetry(nil); ok {
		t.Error("ShouldRetry(nil) reported ok")
	}
}

func TestRetryHint(t *testing.T) {
	tests := []struct {
		msg  string
		want time.Duration
		ok   bool
	}{
		{"Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 200000, Used 199821, Requested 2295. Please try again in 634ms. Visit https://platform.openai.com/account/rate-limits to learn more.", 634 * time.Millisecond, true},
		{"Please try again in 1.5s.", 1500 * time.Millisecond, true},
		{"Rate limit reached ... Please try again in 6m0s.", 6 * time.Minute, true},
		{"try again in 1m30.5s", 90*time.Second + 500*time.Millisecond, true},
		{"Please try again in 20s", 20 * time.Second, true},
		{"You exceeded your current quota, please check your plan and billing details. Please retry in 10.68s.", 10680 * time.Millisecond, true},
		{"Please retry in 1.277436523s.", 1277436523 * time.Nanosecond, true},
		{"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-02-01 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 37 seconds. Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the default rate limit.", 37 * time.Second, true},
		{"retry after 20 seconds", 20 * time.Second, true},
		{"Please retry after 1 second.", time.Second, true},
		{"PLEASE TRY AGAIN IN 250MS", 250 * time.Millisecond, true},
		{"try again in 2 minutes", 2 * time.Minute, true},
		{"try again in 1 hour", time.Hour, true},
		{"Try again after 500 milliseconds", 500 * time.Millisecond, true},
		{"try again in 3 secs", 3 * time.Second, true},
		{"try again in 0s", 0, true},
		{"retry after a while, or try again in 5s", 5 * time.Second, true},
		{"try again in 5s or retry after 9 seconds", 5 * time.Second, true},
		{"retry after 9 seconds or try again in 5s", 9 * time.Second, true},
		{"try again in 5seconds", 5 * time.Second, true},
		{"try again later", 0, false},
		{"try again in a few minutes", 0, false},
		{"retry in 5 parsecs", 0, false},
		{"retry in -5s", 0, false},
		{"retry in", 0, false},
		{"", 0, false},
		{"The server had an error while processing your request. Sorry about that!", 0, false},
	}
	for _, tt := range tests {
		got, ok := headers.RetryHint(tt.msg)
		if got != tt.want || ok != tt.ok {
			t.Errorf("RetryHint(%q) = %v, %v; want %v, %v", tt.msg, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"6m0s", 6 * time.Minute, true},
		{"1s", time.Second, true},
		{"12ms", 12 * time.Millisecond, true},
		{"1h2m3.5s", time.Hour + 2*time.Minute + 3500*time.Millisecond, true},
		{"0.5s", 500 * time.Millisecond, true},
		{"7.66s", 7660 * time.Millisecond, true},
		{"2m59.56s", 2*time.Minute + 59560*time.Millisecond, true},
		{"250us", 250 * time.Microsecond, true},
		{"250µs", 250 * time.Microsecond, true},
		{"250μs", 250 * time.Microsecond, true},
		{"10ns", 10, true},
		{"20", 20 * time.Second, true},
		{"0.5", 500 * time.Millisecond, true},
		{".5s", 500 * time.Millisecond, true},
		{"0", 0, true},
		{" 3s ", 3 * time.Second, true},
		{"1.000000000001s", time.Second, true},
		{"", 0, false},
		{"s", 0, false},
		{".", 0, false},
		{"-1s", 0, false},
		{"+1s", 0, false},
		{"1e3", 0, false},
		{"1x", 0, false},
		{"1s2", 0, false},
		{"1..5s", 0, false},
		{"1.5.5s", 0, false},
		{"abc", 0, false},
		{"1 s", 0, false},
		{"9999999999999h", maxDur, true},
		{"99999999999999999999999999s", maxDur, true},
		{"2562047h47m16.854775807s", maxDur, true},
		{"2562047h47m16.854775808s", maxDur, true},
	}
	for _, tt := range tests {
		got, ok := headers.ParseDuration(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseDurationMatchesStdlib(t *testing.T) {
	for _, s := range []string{"6m0s", "1s", "12ms", "1h2m3.5s", "0.5s", "3h", "1m1.001s", "100us", "5ns", "1.25h"} {
		want, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := headers.ParseDuration(s); !ok || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; time.ParseDuration says %v", s, got, ok, want)
		}
	}
}

func TestParseReset(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"6m0s", 6 * time.Minute, true},
		{"12ms", 12 * time.Millisecond, true},
		{"20", 20 * time.Second, true},
		{"2026-03-01T12:00:30Z", 30 * time.Second, true},
		{"2026-03-01T12:00:30.250Z", 30250 * time.Millisecond, true},
		{"2026-03-01T13:00:30+01:00", 30 * time.Second, true},
		{"2026-03-01T11:00:00Z", 0, true}, // past: clamped
		{"2026-03-01T12:00:00Z", 0, true},
		{"1772366430", 30 * time.Second, true},            // Unix seconds
		{"1772366430500", 30500 * time.Millisecond, true}, // Unix milliseconds
		{"1000000000", 0, true},                           // Unix seconds in the past
		{"999999999", 999999999 * time.Second, true},      // below 1e9: plain seconds
		{"2026-03-01", 0, false},
		{"2026-13-01T12:00:00Z", 0, false},
		{"tomorrow", 0, false},
		{"", 0, false},
		{"-5", 0, false},
	}
	for _, tt := range tests {
		got, ok := headers.ParseReset(tt.in, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseReset(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestReadWindow(t *testing.T) {
	const (
		lim = "X-Ratelimit-Limit-Requests" // ReadWindow takes canonical names
		rem = "X-Ratelimit-Remaining-Requests"
		rst = "X-Ratelimit-Reset-Requests"
	)
	tests := []struct {
		name string
		h    http.Header
		want headers.Window
	}{
		{"all three", hdr(lim, "500", rem, "499", rst, "120ms"), headers.Window{Known: true, Limit: 500, Remaining: 499, Reset: 120 * time.Millisecond}},
		{"remaining only (Azure)", hdr(rem, "12"), headers.Window{Known: true, Remaining: 12}},
		{"limit only", hdr(lim, "10000"), headers.Window{Known: true, Limit: 10000}},
		{"reset only is not known", hdr(rst, "1s"), headers.Window{Reset: time.Second}},
		{"none", hdr(), headers.Window{}},
		{"nil", nil, headers.Window{}},
		{"negative remaining ignored", hdr(lim, "0", rem, "-1"), headers.Window{Known: true}},
		{"garbage counts", hdr(lim, "lots", rem, "x"), headers.Window{}},
		{"fraction truncated", hdr(rem, "149984.0"), headers.Window{Known: true, Remaining: 149984}},
		{"RFC 3339 reset (Anthropic)", hdr(rem, "0", rst, "2026-03-01T12:01:00Z"), headers.Window{Known: true, Reset: time.Minute}},
		{"zero remaining is known", hdr(rem, "0", rst, "6m0s"), headers.Window{Known: true, Reset: 6 * time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := headers.ReadWindow(tt.h, lim, rem, rst, now); got != tt.want {
				t.Fatalf("ReadWindow = %+v; want %+v", got, tt.want)
			}
		})
	}
}

func BenchmarkRetryHint(b *testing.B) {
	msg := "Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 200000, Used 199821, Requested 2295. Please try again in 634ms. Visit https://platform.openai.com/account/rate-limits to learn more."
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := headers.RetryHint(msg); !ok {
			b.Fatal("no hint")
		}
	}
}

func BenchmarkRetryAfter(b *testing.B) {
	h := hdr("retry-after", "20", "x-ratelimit-reset-tokens", "6m0s")
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := headers.RetryAfter(h, now); !ok {
			b.Fatal("no wait")
		}
	}
}

func TestContainsFold(t *testing.T) {
	tests := []struct {
		s, t string
		want bool
	}{
		{"This model's maximum CONTEXT Length is 4096", "context length", true},
		{"Overloaded", "overloaded", true},
		{"context", "context length", false},
		{"", "", true},
		{"abc", "", true},
		{"", "a", false},
		{"ccontext", "context", true},
		{"contex", "context", false},
		{"ÉCONTEXT", "context", true},
	}
	for _, tt := range tests {
		if got := headers.ContainsFold(tt.s, tt.t); got != tt.want {
			t.Errorf("ContainsFold(%q, %q) = %v, want %v", tt.s, tt.t, got, tt.want)
		}
	}
}

// Value finds what Header.Get finds for a canonical key, in headers as net/http builds them.
func TestValueIsGetForCanonicalKeys(t *testing.T) {
	h := http.Header{}
	h.Add("x-ratelimit-remaining-tokens", "12")
	h.Add("retry-after", "3")
	for _, k := range []string{"X-Ratelimit-Remaining-Tokens", "Retry-After", "Retry-After-Ms", "X-Should-Retry"} {
		if k != http.CanonicalHeaderKey(k) {
			t.Fatalf("%q is not canonical", k)
		}
		if got, want := headers.Value(h, k), h.Get(k); got != want {
			t.Errorf("Value(%q) = %q, Get = %q", k, got, want)
		}
	}
}

func TestReadWindowsBounds(t *testing.T) {
	h := hdr("X-Ratelimit-Limit-Requests", "10", "X-Ratelimit-Remaining-Tokens", "5")
	names := [][3]string{{"Limit-Requests", "Remaining-Requests", "Reset-Requests"}, {"Limit-Tokens", "Remaining-Tokens", "Reset-Tokens"}}
	out := []headers.Window{{Limit: -7}, {Limit: -7}, {Limit: -7}}
	headers.ReadWindows(h, "X-Ratelimit-", names, now, out[:1]) // out shorter than names
	if out[0] != (headers.Window{Known: true, Limit: 10}) || out[1].Limit != -7 {
		t.Fatalf("short out: %+v", out)
	}
	headers.ReadWindows(h, "X-Ratelimit-", names, now, out) // out longer than names
	if out[1] != (headers.Window{Known: true, Remaining: 5}) || out[2].Limit != -7 {
		t.Fatalf("long out: %+v", out)
	}
	headers.ReadWindows(nil, "X-Ratelimit-", names, now, out[:2])
	if out[0] != (headers.Window{}) || out[1] != (headers.Window{}) {
		t.Fatalf("nil header: %+v", out)
	}
}

// ReadWindows at a zero now reads what it reads at the time of the call: relative resets
// alike, an absolute one between the readings of the clock before and after it.
func TestReadWindowsAtZeroNowIsTheCallsTime(t *testing.T) {
	names := [][3]string{{"Limit-Requests", "Remaining-Requests", "Reset-Requests"}, {"Limit-Tokens", "Remaining-Tokens", "Reset-Tokens"}}
	abs := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, h := range []http.Header{
		nil,
		{},
		hdr("Content-Type", "application/json"),
		hdr("X-Ratelimit-Limit-Requests", "10", "X-Ratelimit-Remaining-Tokens", "5", "X-Ratelimit-Reset-Tokens", "6m0s"),
		hdr("X-Ratelimit-Reset-Requests", "1s", "Other", "x"),
		hdr("X-Ratelimit-Reset-Tokens", abs),
		hdr("X-Ratelimit-Limit-Requests", "-1", "X-Ratelimit-Unrelated", "3"),
	} {
		var before, got, after [2]headers.Window
		t0 := time.Now()
		headers.ReadWindows(h, "X-Ratelimit-", names, time.Time{}, got[:])
		t1 := time.Now()
		headers.ReadWindows(h, "X-Ratelimit-", names, t0, before[:])
		headers.ReadWindows(h, "X-Ratelimit-", names, t1, after[:])
		for i := range got {
			g, b, a := got[i], before[i], after[i]
			if g.Known != b.Known || g.Limit != b.Limit || g.Remaining != b.Remaining || g.Reset > b.Reset || g.Reset < a.Reset {
				t.Errorf("%v: window %d = %+v, want %+v (at the call) .. %+v (after it)", h, i, g, b, a)
			}
		}
	}
}
