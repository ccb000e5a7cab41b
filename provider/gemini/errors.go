package gemini

import (
	"bytes"
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

// wireStatus is a google.rpc.Status error: {"error":{"code","message","status","details"}}.
type wireStatus struct {
	Code    int          `json:"code"`
	Message string       `json:"message"`
	Status  string       `json:"status"`
	Details []wireDetail `json:"details"`
}

// wireDetail is the union of the detail types read: RetryInfo, QuotaFailure, ErrorInfo.
type wireDetail struct {
	Type       string `json:"@type"`
	RetryDelay string `json:"retryDelay"`
	Reason     string `json:"reason"`
	Violations []struct {
		QuotaMetric string `json:"quotaMetric"`
		QuotaID     string `json:"quotaId"`
	} `json:"violations"`
}

type wireErrorBody struct {
	Error *wireStatus `json:"error"`
}

// ClassifyError turns a Gemini API or Vertex AI error response (google.rpc.Status, as an
// object or wrapped in a one-element array) into an *llmclient.Error: the class, the
// status name (Code, e.g. "RESOURCE_EXHAUSTED"), ErrorInfo.reason (Type, e.g.
// "API_KEY_INVALID"), the message, RetryAfter and x-should-retry. body may be truncated or
// not JSON; the class then follows the HTTP status alone. Gemini sends no rate-limit
// headers, so RateLimits stays nil.
//
// RetryAfter is taken from the Retry-After headers, else RetryInfo.retryDelay ("22s"),
// else a "Please retry in 10.68s" hint in the message.
//
//	RESOURCE_EXHAUSTED  429  rate_limited; quota_exhausted when a QuotaFailure quotaId
//	                         says PerDay (a daily quota: waiting a minute will not help)
//	RESOURCE_EXHAUSTED  402  quota_exhausted (prepaid credits used up)
//	INVALID_ARGUMENT    400  bad_request; context_length when the message says the input
//	                         token count exceeds the maximum; auth with ErrorInfo reason
//	                         API_KEY_INVALID
//	FAILED_PRECONDITION 400  bad_request
//	UNAUTHENTICATED     401  auth
//	PERMISSION_DENIED   403  permission
//	NOT_FOUND           404  not_found
//	CANCELLED           499  canceled
//	INTERNAL            500  server_error; context_length when the message says the input
//	                         context is too long
//	UNAVAILABLE         503  overloaded
//	DEADLINE_EXCEEDED   504  timeout
//
// ClassifyError is safe for concurrent use.
func ClassifyError(status int, h http.Header, body []byte) *llmclient.Error {
	return classifyAt(status, h, body, time.Now())
}

func classifyAt(status int, h http.Header, body []byte, now time.Time) *llmclient.Error {
	st := parseStatus(body)
	e := fromStatus(status, st, body)
	if d, ok := headers.RetryAfter(h, now); ok {
		e.RetryAfter = d
	}
	if v, ok := headers.ShouldRetry(h); ok {
		e.ShouldRetry = &v
	}
	return e
}

// fromStatus builds the error from a parsed status (nil when the body had none) and the
// body hints; header hints, if any, are applied by the caller and win.
func fromStatus(status int, st *wireStatus, body []byte) *llmclient.Error {
	e := &llmclient.Error{Status: status}
	if st == nil {
		e.Message = httpx.Snippet(body, 512)
		e.Class = classify(status, "", "", "", false)
		return e
	}
	e.Code, e.Message = st.Status, st.Message
	perDay := false
	for _, d := range st.Details {
		switch {
		case strings.HasSuffix(d.Type, "ErrorInfo") && d.Reason != "":
			e.Type = d.Reason
		case strings.HasSuffix(d.Type, "RetryInfo"):
			if v, ok := headers.ParseDuration(d.RetryDelay); ok {
				e.RetryAfter = v
			}
		}
		for _, v := range d.Violations {
			if headers.ContainsFold(v.QuotaID, "perday") || headers.ContainsFold(v.QuotaMetric, "per_day") {
				perDay = true
			}
		}
	}
	if e.RetryAfter == 0 {
		if v, ok := headers.RetryHint(st.Message); ok {
			e.RetryAfter = v
		}
	}
	code := status
	if code == 0 || code == http.StatusOK {
		code = st.Code // an error inside a 200 stream
	}
	e.Class = classify(code, st.Status, e.Type, st.Message, perDay)
	e.Message = adapter.VendorMessage(e.Message)
	return e
}

// parseStatus reads {"error":{...}} or [{"error":{...}}]; nil when body is neither.
func parseStatus(body []byte) *wireStatus {
	b := bytes.TrimSpace(body)
	if len(b) > 0 && b[0] == '[' {
		var arr []wireErrorBody
		if json.Unmarshal(b, &arr) != nil || len(arr) == 0 {
			return nil
		}
		return arr[0].Error
	}
	var one wireErrorBody
	if json.Unmarshal(b, &one) != nil {
		return nil
	}
	return one.Error
}

// classify maps the status name (or, without one, the HTTP code) to a class.
func classify(code int, status, reason, msg string, perDay bool) failure.Class {
	if reason == "API_KEY_INVALID" {
		return failure.Auth
	}
	switch status {
	case "RESOURCE_EXHAUSTED":
		if code == http.StatusPaymentRequired || perDay {
			return failure.QuotaExhausted
		}
		return failure.RateLimited
	case "INVALID_ARGUMENT", "OUT_OF_RANGE":
		if isContextLength(msg) {
			return failure.ContextLength
		}
		return failure.BadRequest
	case "FAILED_PRECONDITION", "UNIMPLEMENTED", "ALREADY_EXISTS":
		return failure.BadRequest
	case "UNAUTHENTICATED":
		return failure.Auth
	case "PERMISSION_DENIED":
		return failure.Permission
	case "NOT_FOUND":
		return failure.NotFound
	case "CANCELLED":
		return failure.Canceled
	case "INTERNAL", "UNKNOWN", "DATA_LOSS", "ABORTED":
		if isContextLength(msg) {
			return failure.ContextLength
		}
		return failure.ServerError
	case "UNAVAILABLE":
		return failure.Overloaded
	case "DEADLINE_EXCEEDED":
		return failure.Timeout
	}
	switch {
	case code == http.StatusBadRequest, code == http.StatusInternalServerError:
		if isContextLength(msg) {
			return failure.ContextLength
		}
		if code == http.StatusBadRequest {
			return failure.BadRequest
		}
		return failure.ServerError
	case code == http.StatusRequestEntityTooLarge, code == http.StatusUnprocessableEntity:
		return failure.BadRequest
	case code == http.StatusUnauthorized:
		return failure.Auth
	case code == http.StatusPaymentRequired:
		return failure.QuotaExhausted
	case code == http.StatusForbidden:
		return failure.Permission
	case code == http.StatusNotFound:
		return failure.NotFound
	case code == http.StatusRequestTimeout, code == http.StatusGatewayTimeout:
		return failure.Timeout
	case code == http.StatusTooManyRequests:
		if perDay {
			return failure.QuotaExhausted
		}
		return failure.RateLimited
	case code == 499:
		return failure.Canceled
	case code == http.StatusServiceUnavailable:
		return failure.Overloaded
	case code >= 500:
		return failure.ServerError
	}
	return failure.Unknown
}

// isContextLength recognizes prompts over the model's limit: "The input token count
// (1234567) exceeds the maximum number of tokens allowed (1048576)." and the 500
// "input context is too long" cause.
func isContextLength(msg string) bool {
	return headers.ContainsFold(msg, "exceeds the maximum number of tokens") ||
		headers.ContainsFold(msg, "input token count") ||
		headers.ContainsFold(msg, "context too long") || headers.ContainsFold(msg, "context is too long")
}
