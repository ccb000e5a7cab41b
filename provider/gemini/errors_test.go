package gemini_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/gemini"
)

// status is a google.rpc.Status error body as documented at
// ai.google.dev/gemini-api/docs/troubleshooting; details is a JSON array or "".
func status(code int, name, msg, details string) string {
	s := `{"error":{"code":` + itoa(code) + `,"message":"` + msg + `","status":"` + name + `"`
	if details != "" {
		s += `,"details":` + details
	}
	return s + "}}"
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

const (
	perMinute = `[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-flash"},"quotaValue":"10"}]},` +
		`{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},` +
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"22s"}]`
	perDay = `[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaValue":"250"}]},` +
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"41s"}]`
	keyInvalid = `[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com","metadata":{"service":"generativelanguage.googleapis.com"}}]`
)

func TestClassifyError(t *testing.T) {
	const quotaMsg = "You exceeded your current quota, please check your plan and billing details."
	cases := []struct {
		name   string
		status int
		body   string
		header http.Header
		want   failure.Class
		retry  time.Duration
	}{
		{"per-minute quota", 429, status(429, "RESOURCE_EXHAUSTED", quotaMsg, perMinute), nil, failure.RateLimited, 22 * time.Second},
		{"per-day quota", 429, status(429, "RESOURCE_EXHAUSTED", quotaMsg, perDay), nil, failure.QuotaExhausted, 41 * time.Second},
		{"retry hint in message", 429, status(429, "RESOURCE_EXHAUSTED", quotaMsg+" Please retry in 10.68s.", ""), nil, failure.RateLimited, 10680 * time.Millisecond},
		{"header beats body", 429, status(429, "RESOURCE_EXHAUSTED", quotaMsg, perMinute), http.Header{"Retry-After": {"5"}}, failure.RateLimited, 5 * time.Second},
		{"vertex shared quota", 429, status(429, "RESOURCE_EXHAUSTED", "Resource exhausted. Please try again later.", ""), nil, failure.RateLimited, 0},
		{"prepaid credits", 402, status(402, "RESOURCE_EXHAUSTED", "Your prepaid credits are exhausted.", ""), nil, failure.QuotaExhausted, 0},
		{"invalid argument", 400, status(400, "INVALID_ARGUMENT", "Invalid JSON payload received. Unknown name \\\"foo\\\": Cannot find field.", ""), nil, failure.BadRequest, 0},
		{"token limit", 400, status(400, "INVALID_ARGUMENT", "The input token count (1234567) exceeds the maximum number of tokens allowed (1048576).", ""), nil, failure.ContextLength, 0},
		{"api key invalid", 400, status(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", keyInvalid), nil, failure.Auth, 0},
		{"failed precondition", 400, status(400, "FAILED_PRECONDITION", "User location is not supported for the API use.", ""), nil, failure.BadRequest, 0},
		{"unauthenticated", 401, status(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.", ""), nil, failure.Auth, 0},
		{"permission denied", 403, status(403, "PERMISSION_DENIED", "You do not have permission to access the resource.", ""), nil, failure.Permission, 0},
		{"not found", 404, status(404, "NOT_FOUND", "models/gemini-9 is not found for API version v1beta.", ""), nil, failure.NotFound, 0},
		{"cancelled", 499, status(499, "CANCELLED", "The operation was cancelled.", ""), nil, failure.Canceled, 0},
		{"internal", 500, status(500, "INTERNAL", "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting", ""), nil, failure.ServerError, 0},
		{"internal context", 500, status(500, "INTERNAL", "Internal error: input context too long.", ""), nil, failure.ContextLength, 0},
		{"unavailable", 503, status(503, "UNAVAILABLE", "The model is overloaded. Please try again later.", ""), nil, failure.Overloaded, 0},
		{"deadline", 504, status(504, "DEADLINE_EXCEEDED", "The request timed out. Please try again.", ""), nil, failure.Timeout, 0},
		{"array form", 429, "[" + status(429, "RESOURCE_EXHAUSTED", quotaMsg, perMinute) + "]", nil, failure.RateLimited, 22 * time.Second},
		// Bodies without a status: the HTTP code decides.
		{"bare 429", 429, "", nil, failure.RateLimited, 0},
		{"bare 400", 400, "bad", nil, failure.BadRequest, 0},
		{"bare 401", 401, "", nil, failure.Auth, 0},
		{"bare 402", 402, "", nil, failure.QuotaExhausted, 0},
		{"bare 403", 403, "", nil, failure.Permission, 0},
		{"bare 404", 404, "<html>Not Found</html>", nil, failure.NotFound, 0},
		{"bare 499", 499, "", nil, failure.Canceled, 0},
		{"bare 502", 502, "<html>Bad Gateway</html>", nil, failure.ServerError, 0},
		{"bare 503", 503, "", nil, failure.Overloaded, 0},
		{"bare 504", 504, "", nil, failure.Timeout, 0},
		{"code only", 400, `{"error":{"code":400,"message":"The input token count exceeds the maximum number of tokens allowed."}}`, nil, failure.ContextLength, 0},
		{"odd status", 418, "teapot", nil, failure.Unknown, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := gemini.ClassifyError(tc.status, tc.header, []byte(tc.body))
			providertest.CheckClass(t, e, tc.want, tc.status, tc.retry)
			if strings.Contains(tc.body, `"status"`) && (e.Code == "" || e.Message == "") {
				t.Errorf("vendor fields lost: code %q, message %q", e.Code, e.Message)
			}
		})
	}
}

func TestClassifyErrorFields(t *testing.T) {
	e := gemini.ClassifyError(400, http.Header{"X-Should-Retry": {"false"}},
		[]byte(status(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", keyInvalid)))
	if e.Code != "INVALID_ARGUMENT" || e.Type != "API_KEY_INVALID" || e.ShouldRetry == nil || *e.ShouldRetry || e.RateLimits != nil {
		t.Errorf("error = %+v", e)
	}
	if !strings.HasPrefix(e.Error(), "llmclient: auth: status 400: INVALID_ARGUMENT: API key not valid") {
		t.Errorf("Error() = %q", e.Error())
	}
}

// TestCompleteErrorResponse checks that an HTTP error reaches the caller classified, with
// the model set and the key redacted from the vendor's message.
func TestCompleteErrorResponse(t *testing.T) {
	body := status(400, "INVALID_ARGUMENT", "API key "+testKey+" not valid.", keyInvalid)
	p, _ := serve(t, providertest.Fixed(http.StatusBadRequest, body))
	e := providertest.CompleteError(t, p, providertest.UserCall("gemini-2.5-flash", llmclient.UserMessage("hi")))
	if e.Class != failure.Auth || e.Status != 400 || e.Model != "gemini-2.5-flash" {
		t.Errorf("error = %+v", e)
	}
	if strings.Contains(e.Error(), testKey) {
		t.Errorf("API key leaked: %q", e.Error())
	}
}
