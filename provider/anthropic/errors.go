package anthropic

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/adapter"
	"github.com/llmclient/llmclient/internal/headers"
	"github.com/llmclient/llmclient/internal/httpx"
)

// wireErrorBody is the error response: {"type":"error","error":{...},"request_id":"..."}.
// It is also the data of a stream's error event.
type wireErrorBody struct {
	Type      string     `json:"type"`
	Error     *wireError `json:"error"`
	RequestID string     `json:"request_id"`
}

type wireError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Details *struct {
		ErrorCode string `json:"error_code"`
	} `json:"details"`
}

// ClassifyError turns an Anthropic error response into an *llmclient.Error: the class, the
// vendor's error type (Type), details.error_code if any (Code), message and request id
// (body request_id, else the request-id header), the Retry-After and x-should-retry headers,
// and the anthropic-ratelimit-* headers. body may be truncated or not JSON at all; the class
// then follows the status alone. Relative header times are read against time.Now.
//
// The error type decides the class; the status is only a fallback for unknown types:
//
//	invalid_request_error  400  bad_request; context_length when the message says
//	                            "prompt is too long" or the input exceeds the context limit;
//	                            quota_exhausted for "credit balance is too low", "specified
//	                            API usage limits" and spend limits
//	authentication_error   401  auth
//	billing_error          402  quota_exhausted
//	permission_error       403  permission
//	not_found_error        404  not_found
//	request_too_large      413  bad_request
//	rate_limit_error       429  rate_limited; quota_exhausted for details.error_code
//	                            "enforced_spend_limit_reached" or a spend-limit message
//	api_error              500  server_error
//	timeout_error          504  timeout (the upstream gave up; retried and counted for the
//	                            breaker like a server error)
//	overloaded_error       529  overloaded
//
// ClassifyError is safe for concurrent use.
func ClassifyError(status int, h http.Header, body []byte) *llmclient.Error {
	return classifyAt(status, h, body, time.Now())
}

func classifyAt(status int, h http.Header, body []byte, now time.Time) *llmclient.Error {
	e := &llmclient.Error{Status: status}
	var w wireErrorBody
	if json.Unmarshal(body, &w) == nil && w.Error != nil {
		e.Type = w.Error.Type
		e.Message = w.Error.Message
		if w.Error.Details != nil {
			e.Code = w.Error.Details.ErrorCode
		}
		e.RequestID = w.RequestID
	} else if s := httpx.Snippet(body, 512); s != "" {
		e.Message = s
	}
	e.Class = classify(status, e.Type, e.Code, e.Message)
	e.Message = adapter.VendorMessage(e.Message)
	if e.RequestID == "" && h != nil {
		e.RequestID = h.Get("Request-Id")
	}
	if d, ok := headers.RetryAfter(h, now); ok {
		e.RetryAfter = d
	}
	if v, ok := headers.ShouldRetry(h); ok {
		e.ShouldRetry = &v
	}
	e.RateLimits = parseRateLimits(h, now)
	return e
}

// classify maps an error type (or, for unknown types, the status) to a class.
func classify(status int, typ, code, msg string) failure.Class {
	switch typ {
	case "invalid_request_error":
		switch {
		case isContextLength(msg):
			return failure.ContextLength
		case isSpendLimit(code, msg), strings.Contains(strings.ToLower(msg), "api usage limits"):
			return failure.QuotaExhausted
		}
		return failure.BadRequest
	case "authentication_error":
		return failure.Auth
	case "billing_error":
		return failure.QuotaExhausted
	case "permission_error":
		return failure.Permission
	case "not_found_error":
		return failure.NotFound
	case "request_too_large":
		return failure.BadRequest
	case "rate_limit_error":
		if isSpendLimit(code, msg) {
			return failure.QuotaExhausted
		}
		return failure.RateLimited
	case "api_error":
		return failure.ServerError
	case "timeout_error":
		return failure.Timeout
	case "overloaded_error":
		return failure.Overloaded
	}
	return classifyStatus(status)
}

// classifyStatus is the fallback for bodies without a known error type.
func classifyStatus(status int) failure.Class {
	switch {
	case status == http.StatusBadRequest, status == http.StatusRequestEntityTooLarge,
		status == http.StatusUnprocessableEntity:
		return failure.BadRequest
	case status == http.StatusUnauthorized:
		return failure.Auth
	case status == http.StatusPaymentRequired:
		return failure.QuotaExhausted
	case status == http.StatusForbidden:
		return failure.Permission
	case status == http.StatusNotFound:
		return failure.NotFound
	case status == http.StatusRequestTimeout, status == http.StatusGatewayTimeout:
		return failure.Timeout
	case status == http.StatusTooManyRequests:
		return failure.RateLimited
	case status == 529, status == http.StatusServiceUnavailable:
		return failure.Overloaded
	case status >= 500:
		return failure.ServerError
	}
	return failure.Unknown
}

// isContextLength recognizes the 400 messages for a prompt that does not fit:
// "prompt is too long: 208310 tokens > 200000 maximum" and "input length and `max_tokens`
// exceed context limit: 197626 + 8192 > 200000, ...". The message is all there is.
func isContextLength(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "prompt is too long") || strings.Contains(m, "exceed context limit")
}

// isSpendLimit recognizes spending caps, which do not lift by waiting a minute: the
// enforced_spend_limit_reached code, "This request would exceed your account's monthly
// spend limit" and "Your credit balance is too low to access the Anthropic API". (A 400
// "You have reached your specified API usage limits" is checked by the caller.)
func isSpendLimit(code, msg string) bool {
	if code == "enforced_spend_limit_reached" {
		return true
	}
	m := strings.ToLower(msg)
	return strings.Contains(m, "spend limit") || strings.Contains(m, "credit balance")
}
