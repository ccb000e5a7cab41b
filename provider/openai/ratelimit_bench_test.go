package openai

import (
	"net/http"
	"testing"
	"time"
)

// BenchmarkParseRateLimits reads the quota headers of a response carrying OpenAI's six
// x-ratelimit-* headers among others, and of one carrying none: what a one-shot answer
// and a typed stream pay as they open.
func BenchmarkParseRateLimits(b *testing.B) {
	full := http.Header{}
	for k, v := range map[string]string{
		"x-ratelimit-limit-requests": "10000", "x-ratelimit-remaining-requests": "9999", "x-ratelimit-reset-requests": "6ms",
		"x-ratelimit-limit-tokens": "30000000", "x-ratelimit-remaining-tokens": "29999000", "x-ratelimit-reset-tokens": "2ms",
		"content-type": "text/event-stream", "x-request-id": "req_1", "openai-processing-ms": "120", "date": "Thu, 03 Dec 2026 17:00:00 GMT",
	} {
		full.Set(k, v)
	}
	none := http.Header{"Content-Type": {"text/event-stream"}, "Date": {"Thu, 03 Dec 2026 17:00:00 GMT"}}
	for _, c := range []struct {
		name string
		h    http.Header
	}{{"openai-headers", full}, {"none", none}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if rl := ParseRateLimits(c.h, time.Now()); (rl != nil) != (c.name != "none") {
					b.Fatal("unexpected report")
				}
			}
		})
	}
}
