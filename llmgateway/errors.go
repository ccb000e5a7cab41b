package llmgateway

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
)

// dialect is the wire family of a front door, which shapes its error bodies.
type dialect uint8

const (
	dialectOpenAI dialect = iota
	dialectAnthropic
)

// apiError is what the gateway answers for a failed request: the status, the vendor's
// error type and code, and the headers that tell an SDK whether and when to retry.
type apiError struct {
	status  int
	oaType  string // OpenAI error.type
	oaCode  string // OpenAI error.code ("" renders null)
	anType  string // Anthropic error.type
	message string
	param   string
	// retryAfter, when positive, is sent as retry-after (seconds, rounded up) and
	// retry-after-ms.
	retryAfter time.Duration
	// noRetry sends x-should-retry: false, for failures a repeat will not fix.
	noRetry bool
	class   failure.Class
}

// localError is a refusal by the gateway itself (bad JSON, unknown key, model not
// allowed, body too large).
func localError(status int, message string) *apiError {
	e := &apiError{status: status, message: message, class: failure.BadRequest}
	switch status {
	case http.StatusUnauthorized:
		e.oaType, e.oaCode, e.anType, e.class = "invalid_request_error", "invalid_api_key", "authentication_error", failure.Auth
	case http.StatusForbidden:
		e.oaType, e.oaCode, e.anType, e.class = "invalid_request_error", "model_not_allowed", "permission_error", failure.Permission
	case http.StatusNotFound:
		e.oaType, e.oaCode, e.anType, e.class = "invalid_request_error", "unknown_url", "not_found_error", failure.NotFound
	case http.StatusRequestEntityTooLarge:
		e.oaType, e.oaCode, e.anType = "invalid_request_error", "request_too_large", "request_too_large"
	case http.StatusMethodNotAllowed:
		e.oaType, e.anType = "invalid_request_error", "invalid_request_error"
	case http.StatusRequestTimeout:
		// The caller's body did not arrive in time: logged as a timeout, not a bad request.
		e.oaType, e.anType, e.class = "invalid_request_error", "invalid_request_error", failure.Timeout
	case http.StatusServiceUnavailable:
		e.oaType, e.oaCode, e.anType, e.class = "service_unavailable_error", "shutting_down", "overloaded_error", failure.Unavailable
	default:
		e.oaType, e.anType = "invalid_request_error", "invalid_request_error"
	}
	return e
}

// fieldError is a request field out of its range, found while decoding: a 400 that
// names the field (OpenAI's error.param, and error.code when set).
type fieldError struct{ param, code, msg string }

func (e *fieldError) Error() string { return e.msg }

// decodeError is the answer to a request body the front door refused.
func decodeError(err error) *apiError {
	e := localError(http.StatusBadRequest, err.Error())
	var fe *fieldError
	if errors.As(err, &fe) {
		e.param, e.oaCode = fe.param, fe.code
	}
	return e
}

// fromError maps a Client error to the answer of its class. Statuses follow what
// the vendors send for the same failure; failures of the gateway's own upstream
// credentials are 502, not 401/403, since the caller's key was fine.
func fromError(err error) *apiError {
	var le *llmclient.Error
	errors.As(err, &le)
	class := llmclient.ClassOf(err)
	e := &apiError{class: class, message: "llmclient: request failed"}
	if le != nil {
		e.message = le.Error()
		e.param = le.Param
		e.retryAfter = max(le.RetryAfter, le.AdmitAfter)
		if le.ShouldRetry != nil && !*le.ShouldRetry {
			e.noRetry = true
		}
	} else if err != nil {
		e.message = "llmclient: " + class.String()
	}
	switch class {
	case failure.RateLimited:
		e.status, e.oaType, e.oaCode, e.anType = 429, "rate_limit_error", "rate_limit_exceeded", "rate_limit_error"
	case failure.QuotaExhausted:
		e.status, e.oaType, e.oaCode, e.anType, e.noRetry = 429, "insufficient_quota", "insufficient_quota", "rate_limit_error", true
		e.retryAfter = 0
	case failure.BudgetExceeded:
		e.status, e.oaType, e.oaCode, e.anType = 429, "insufficient_quota", "budget_exceeded", "rate_limit_error"
		if e.retryAfter <= 0 {
			e.noRetry = true
		}
	case failure.Unpriced:
		// A budget cannot price the model: a policy refusal, which no retry changes.
		e.status, e.oaType, e.oaCode, e.anType, e.noRetry = 403, "invalid_request_error", "model_unpriced", "permission_error", true
		e.retryAfter = 0
	case failure.Overloaded:
		e.status, e.oaType, e.oaCode, e.anType = 503, "service_unavailable_error", "server_is_overloaded", "overloaded_error"
	case failure.ServerError, failure.Network, failure.Unknown, failure.StreamInterrupted, failure.EmptyOutput:
		e.status, e.oaType, e.oaCode, e.anType = 502, "server_error", "upstream_error", "api_error"
	case failure.Timeout:
		e.status, e.oaType, e.oaCode, e.anType = 504, "timeout_error", "timeout", "timeout_error"
	case failure.BadRequest:
		e.status, e.oaType, e.anType = 400, "invalid_request_error", "invalid_request_error"
		if le != nil && le.Code != "" {
			e.oaCode = le.Code
		}
		e.noRetry, e.retryAfter = true, 0
	case failure.ContextLength:
		e.status, e.oaType, e.oaCode, e.anType, e.noRetry = 400, "invalid_request_error", "context_length_exceeded", "invalid_request_error", true
		e.retryAfter = 0
	case failure.ContentFiltered:
		e.status, e.oaType, e.oaCode, e.anType, e.noRetry = 400, "invalid_request_error", "content_filter", "invalid_request_error", true
		e.retryAfter = 0
	case failure.Auth:
		e.status, e.oaType, e.oaCode, e.anType, e.noRetry = 502, "server_error", "upstream_authentication_failed", "api_error", true
	case failure.Permission:
		e.status, e.oaType, e.oaCode, e.anType, e.noRetry = 502, "server_error", "upstream_permission_denied", "api_error", true
	case failure.NotFound:
		e.status, e.oaType, e.oaCode, e.anType, e.noRetry = 404, "invalid_request_error", "model_not_found", "not_found_error", true
		e.retryAfter = 0
	case failure.Canceled:
		e.status, e.oaType, e.oaCode, e.anType = 499, "invalid_request_error", "canceled", "invalid_request_error"
	case failure.Unavailable:
		e.status, e.oaType, e.oaCode, e.anType = 503, "service_unavailable_error", "upstream_unavailable", "overloaded_error"
	default:
		e.status, e.oaType, e.oaCode, e.anType = 502, "server_error", "upstream_error", "api_error"
	}
	return e
}

// writeHeaders sets the retry headers of e.
func (e *apiError) writeHeaders(h http.Header) {
	if e.retryAfter > 0 {
		secs := int64(math.Ceil(e.retryAfter.Seconds()))
		h.Set("retry-after", strconv.FormatInt(max(secs, 1), 10))
		h.Set("retry-after-ms", strconv.FormatInt(max(e.retryAfter.Milliseconds(), 1), 10))
	}
	if e.noRetry {
		h.Set("x-should-retry", "false")
	}
}

type oaErrorBody struct {
	Error oaErrorObject `json:"error"`
}

type oaErrorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

type anErrorBody struct {
	Type      string        `json:"type"`
	Error     anErrorObject `json:"error"`
	RequestID string        `json:"request_id,omitempty"`
}

type anErrorObject struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func strOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// body renders e in d's shape.
func (e *apiError) body(d dialect, requestID string) []byte {
	var v any
	if d == dialectAnthropic {
		v = anErrorBody{Type: "error", Error: anErrorObject{Type: e.anType, Message: e.message}, RequestID: requestID}
	} else {
		v = oaErrorBody{Error: oaErrorObject{Message: e.message, Type: e.oaType, Param: strOrNil(e.param), Code: strOrNil(e.oaCode)}}
	}
	b, _ := json.Marshal(v)
	return b
}

// write sends e as the whole response.
func (e *apiError) write(w http.ResponseWriter, d dialect, requestID string) {
	h := w.Header()
	e.writeHeaders(h)
	h.Set("content-type", "application/json")
	w.WriteHeader(e.status)
	_, _ = w.Write(e.body(d, requestID))
}
