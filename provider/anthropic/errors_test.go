package anthropic_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/llmclient/llmclient/ratelimit"
)

// errBody is an Anthropic error body as documented at docs.anthropic.com/en/api/errors.
func errBody(typ, msg string) string {
	return `{"type":"error","error":{"type":"` + typ + `","message":"` + msg + `"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`
}

func TestClassifyError(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		header http.Header
		want   failure.Class
		retry  time.Duration
	}{
		{"invalid request", 400, errBody("invalid_request_error", "messages: roles must alternate"), nil, failure.BadRequest, 0},
		{"prompt too long", 400, errBody("invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum"), nil, failure.ContextLength, 0},
		{"input plus max_tokens", 400, errBody("invalid_request_error", "input length and `max_tokens` exceed context limit: 197626 + 8192 > 200000, decrease input length or `max_tokens` and try again"), nil, failure.ContextLength, 0},
		{"credit balance", 400, errBody("invalid_request_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."), nil, failure.QuotaExhausted, 0},
		{"workspace usage limit", 400, errBody("invalid_request_error", "You have reached your specified API usage limits. You will regain access on 2026-08-01 at 00:00 UTC."), nil, failure.QuotaExhausted, 0},
		{"authentication", 401, errBody("authentication_error", "invalid x-api-key"), nil, failure.Auth, 0},
		{"billing", 402, errBody("billing_error", "Payment required"), nil, failure.QuotaExhausted, 0},
		{"permission", 403, errBody("permission_error", "Your API key does not have permission to use the specified resource."), nil, failure.Permission, 0},
		{"not found", 404, errBody("not_found_error", "model: claude-nope"), nil, failure.NotFound, 0},
		{"too large", 413, errBody("request_too_large", "Request exceeds the maximum allowed number of bytes."), nil, failure.BadRequest, 0},
		{"rate limit", 429, errBody("rate_limit_error", "This request would exceed your account's rate limit. Please try again later."),
			http.Header{"Retry-After": {"17"}}, failure.RateLimited, 17 * time.Second},
		{"spend limit code", 429, `{"type":"error","error":{"type":"rate_limit_error","message":"Spend limit reached.","details":{"error_code":"enforced_spend_limit_reached"}},"request_id":"req_1"}`,
			http.Header{"Retry-After": {"3600"}}, failure.QuotaExhausted, time.Hour},
		{"spend limit text", 429, errBody("rate_limit_error", "This request would exceed your account's monthly spend limit. Please try again later."), nil, failure.QuotaExhausted, 0},
		{"api error", 500, errBody("api_error", "Internal server error"), nil, failure.ServerError, 0},
		{"timeout", 504, errBody("timeout_error", "Request timed out"), nil, failure.Timeout, 0},
		{"overloaded", 529, errBody("overloaded_error", "Overloaded"), nil, failure.Overloaded, 0},
		// Bodies without a known type: the status decides.
		{"html 502", 502, "<html><body>Bad Gateway</body></html>", nil, failure.ServerError, 0},
		{"bare 529", 529, "", nil, failure.Overloaded, 0},
		{"bare 503", 503, "upstream connect error", nil, failure.Overloaded, 0},
		{"bare 429", 429, "", http.Header{"Retry-After-Ms": {"1500"}}, failure.RateLimited, 1500 * time.Millisecond},
		{"bare 401", 401, "Unauthorized", nil, failure.Auth, 0},
		{"bare 402", 402, "", nil, failure.QuotaExhausted, 0},
		{"bare 403", 403, "", nil, failure.Permission, 0},
		{"bare 404", 404, "", nil, failure.NotFound, 0},
		{"bare 408", 408, "", nil, failure.Timeout, 0},
		{"bare 422", 422, "", nil, failure.BadRequest, 0},
		{"unknown type 500", 500, errBody("brand_new_error", "?"), nil, failure.ServerError, 0},
		{"odd status", 418, "teapot", nil, failure.Unknown, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := anthropic.ClassifyError(tc.status, tc.header, []byte(tc.body))
			providertest.CheckClass(t, e, tc.want, tc.status, tc.retry)
			if strings.HasPrefix(tc.body, "{") && (e.Type == "" || e.Message == "" || e.RequestID == "") {
				t.Errorf("vendor fields lost: type %q, message %q, request id %q", e.Type, e.Message, e.RequestID)
			}
		})
	}
}

func TestClassifyErrorFields(t *testing.T) {
	h := http.Header{}
	h.Set("request-id", "req_from_header")
	h.Set("x-should-retry", "false")
	h.Set("anthropic-ratelimit-tokens-limit", "100000")
	h.Set("anthropic-ratelimit-tokens-remaining", "0")
	h.Set("anthropic-ratelimit-tokens-reset", time.Now().Add(30*time.Second).UTC().Format(time.RFC3339))
	body := `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit","details":{"error_code":"rate_limited"}}}`
	e := anthropic.ClassifyError(429, h, []byte(body))
	if e.Type != "rate_limit_error" || e.Code != "rate_limited" || e.RequestID != "req_from_header" {
		t.Errorf("type %q, code %q, request id %q", e.Type, e.Code, e.RequestID)
	}
	if e.ShouldRetry == nil || *e.ShouldRetry {
		t.Errorf("ShouldRetry = %v, want false", e.ShouldRetry)
	}
	if e.RateLimits == nil || !e.RateLimits.Tokens.Known || e.RateLimits.Tokens.Remaining != 0 ||
		e.RateLimits.Tokens.Reset <= 20*time.Second || e.RateLimits.Tokens.Reset > 30*time.Second {
		t.Errorf("rate limits = %+v", e.RateLimits)
	}
	if !strings.HasPrefix(e.Error(), "llmclient: rate_limited: status 429") {
		t.Errorf("Error() = %q", e.Error())
	}
	// A non-JSON body keeps a cleaned snippet as the message.
	e = anthropic.ClassifyError(502, nil, []byte("<html>\n  Bad   Gateway\n</html>"))
	if e.Message != "<html> Bad Gateway </html>" {
		t.Errorf("snippet message = %q", e.Message)
	}
}

// TestCompleteErrorResponse checks that an HTTP error reaches the caller classified, with
// the model set and the key redacted from the vendor's message.
func TestCompleteErrorResponse(t *testing.T) {
	body := errBody("authentication_error", "invalid x-api-key: "+testKey)
	p, _ := serve(t, providertest.Fixed(http.StatusUnauthorized, body, "request-id", "req_9"))
	e := providertest.CompleteError(t, p, providertest.UserCall("claude-x", llmclient.UserMessage("hi")))
	if e.Class != failure.Auth || e.Status != 401 || e.Model != "claude-x" || e.RequestID != "req_011CSHoEeqs5C35K2UUqR7Fy" {
		t.Errorf("error = %+v", e)
	}
	if strings.Contains(e.Error(), testKey) || strings.Contains(e.Message, testKey) {
		t.Errorf("API key leaked: %q", e.Error())
	}
}

func TestParseRateLimits(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("anthropic-ratelimit-requests-limit", "4000")
	h.Set("anthropic-ratelimit-requests-remaining", "3999")
	h.Set("anthropic-ratelimit-requests-reset", "2026-05-01T12:00:06Z")
	h.Set("anthropic-ratelimit-tokens-limit", "400000")
	h.Set("anthropic-ratelimit-tokens-remaining", "398000")
	h.Set("anthropic-ratelimit-tokens-reset", "2026-05-01T12:00:00.5Z")
	h.Set("anthropic-ratelimit-output-tokens-limit", "80000")
	h.Set("anthropic-ratelimit-output-tokens-remaining", "80000")
	h.Set("anthropic-ratelimit-output-tokens-reset", "2026-05-01T11:59:00Z") // already past
	rl := anthropic.ParseRateLimits(h, now)
	want := ratelimit.Status{
		Requests:     ratelimit.Window{Known: true, Limit: 4000, Remaining: 3999, Reset: 6 * time.Second},
		Tokens:       ratelimit.Window{Known: true, Limit: 400000, Remaining: 398000, Reset: 500 * time.Millisecond},
		OutputTokens: ratelimit.Window{Known: true, Limit: 80000, Remaining: 80000},
	}
	if rl == nil || *rl != want {
		t.Errorf("ParseRateLimits = %+v, want %+v", rl, want)
	}
	if rl := anthropic.ParseRateLimits(http.Header{"Retry-After": {"1"}}, now); rl != nil {
		t.Errorf("no rate-limit headers: got %+v, want nil", rl)
	}
	if rl := anthropic.ParseRateLimits(nil, now); rl != nil {
		t.Errorf("nil header: got %+v", rl)
	}
}
