package openai

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/adapter"
	"github.com/llmclient/llmclient/internal/headers"
	"github.com/llmclient/llmclient/internal/httpx"
)

// snippetLen is how much of an unrecognized error body goes into Error.Message.
const snippetLen = 200

// ClassifyError turns a whole error response — status, headers and body (read by the caller,
// at most httpx.MaxErrorBody bytes) — into an *llmclient.Error with its Class, the vendor's
// type, code, param and message, the request id, Retry-After (headers first, then a "try
// again in …" hint in the message), x-should-retry and the x-ratelimit-* state.
//
// Body shapes understood: OpenAI's {"error":{"message","type","param","code"}} with code a
// string, an integer (vLLM) or null; Azure's innererror; vLLM's flat
// {"object":"error","message",…}; {"error":"text"}; a JSON array wrapping an error object
// (Gemini's OpenAI-compatible endpoint). Anything else (an HTML page from a proxy) keeps
// the status class and the first 200 bytes of the body, cleaned, as the message.
//
// The classes, body before status (a vendor code says more than a status):
//
//	402, or type insufficient_quota, or code insufficient_quota, credit_balance_exhausted,
//	  billing_hard_limit_reached, organization_usage_limit_exceeded, *_spend_limit_exceeded
//	                                                     -> failure.QuotaExhausted
//	code context_length_exceeded                         -> failure.ContextLength
//	code content_filter, content_policy_violation, invalid_prompt,
//	  image_content_policy_violation, bio_policy,
//	  or innererror.code ResponsibleAIPolicyViolation    -> failure.ContentFiltered
//	400/413/422 whose message says the context length is exceeded, when the code says
//	  nothing more specific (none, a number, or a generic word such as
//	  invalid_request_error: vLLM, DeepSeek, Mistral)   -> failure.ContextLength
//	429 (rate_limit_exceeded, slow_down, …)              -> failure.RateLimited
//	400, 413, 422, other 4xx                             -> failure.BadRequest
//	401 -> failure.Auth, 403 -> failure.Permission, 404 -> failure.NotFound, 408 -> failure.Timeout
//	409                                                  -> failure.ServerError
//	503 with code server_is_overloaded or "overloaded" in the message, 529
//	                                                     -> failure.Overloaded
//	500, 502, 503, 504, other 5xx                        -> failure.ServerError
//
// 409 is a server error because OpenAI answers 409 to internal lock contention on the same
// resource, which a retry after a backoff clears (the official SDKs retry it); no request
// of this API can conflict with a user's own state.
//
// A status below 400 marks an in-band error (an error object inside a 200 body or stream):
// an integer code in 400–599 is then used as the status, else the type and code decide
// (a failed Response's code that names a problem with an image of the request, such as
// invalid_image_url or image_too_large, is failure.BadRequest), and an unknown in-band
// error is failure.ServerError, since the server broke a response it had accepted. ClassifyError is safe for concurrent use.
func ClassifyError(status int, h http.Header, body []byte) *llmclient.Error {
	return classifyErrorAt(status, h, body, time.Now())
}

// errorFromBody classifies an error object found inside a body or stream (for example a
// `data: {"error":{…}}` line after HTTP 200). body may be {"error":{…}}, vLLM's flat
// {"object":"error",…} or any shape ClassifyError understands.
func errorFromBody(status int, h http.Header, body []byte) *llmclient.Error {
	return errorFromBodyAt(status, h, body, time.Now())
}

func errorFromBodyAt(status int, h http.Header, body []byte, now time.Time) *llmclient.Error {
	return classifyErrorAt(status, h, body, now)
}

// vendorError is the error fields read from a body, whatever its shape.
type vendorError struct {
	Message, Type, Param string
	Code                 looseString
	Status               string // google.rpc status, from Gemini's compatible endpoint
	InnerCode            string // Azure innererror.code
	parsed               bool   // the body had a recognizable error shape
}

func classifyErrorAt(status int, h http.Header, body []byte, now time.Time) *llmclient.Error {
	v := parseVendorError(body)
	e := &llmclient.Error{
		Status:     status,
		Type:       v.Type,
		Code:       v.Code.S,
		Param:      v.Param,
		Message:    adapter.VendorMessage(v.Message),
		RequestID:  requestID(h),
		RateLimits: ParseRateLimits(h, now),
	}
	if v.Type == "" && v.Status != "" {
		e.Type = v.Status
	}
	if !v.parsed {
		e.Message = httpx.Snippet(body, snippetLen)
	}
	e.Class = classify(status, &v, e.Message)
	if d, ok := headers.RetryAfter(h, now); ok {
		e.RetryAfter = d
	} else if d, ok := headers.RetryHint(e.Message); ok {
		e.RetryAfter = d
	}
	if retry, ok := headers.ShouldRetry(h); ok {
		e.ShouldRetry = &retry
	} else if e.Class == failure.RateLimited && requestTooLarge(e.Message) {
		// "Request too large for gpt-4o … on tokens per min (TPM): Limit 30000, Requested
		// 50000": this request can never fit this key's per-minute limit, so waiting and
		// retrying here is useless; another upstream may take it.
		no := false
		e.ShouldRetry = &no
	}
	return e
}

// requestTooLarge reports whether a 429's message says the request alone exceeds a
// per-minute limit (OpenAI's "Request too large for <model> … on tokens per min").
func requestTooLarge(msg string) bool {
	return strings.HasPrefix(msg, "Request too large for ") && headers.ContainsFold(msg, "per min")
}

// classify picks the class; msg is the message (or body snippet) for text fallbacks.
func classify(status int, v *vendorError, msg string) failure.Class {
	// A numeric code (vLLM's 400, Azure's "429", OpenRouter's 502) repeats a status; only a
	// word is a vendor code.
	code := ""
	numeric := v.Code.Num || isDigits(v.Code.S)
	if !numeric {
		code = strings.ToLower(v.Code.S)
	}
	typ := strings.ToLower(v.Type)
	if status < 400 && numeric {
		if n, err := strconv.Atoi(v.Code.S); err == nil && n >= 400 && n <= 599 {
			status = n
		}
	}

	switch {
	case status == http.StatusPaymentRequired, typ == "insufficient_quota", isQuotaCode(code):
		return failure.QuotaExhausted
	case code == "context_length_exceeded":
		return failure.ContextLength
	case code == "content_filter", code == "content_policy_violation", code == "invalid_prompt",
		code == "image_content_policy_violation", code == "bio_policy",
		strings.EqualFold(v.InnerCode, "ResponsibleAIPolicyViolation"):
		return failure.ContentFiltered
	}

	switch {
	case status == http.StatusTooManyRequests:
		return failure.RateLimited
	case status == http.StatusBadRequest, status == http.StatusRequestEntityTooLarge, status == http.StatusUnprocessableEntity:
		if !isSpecificCode(code, typ) && saysContextLength(msg) {
			return failure.ContextLength
		}
		return failure.BadRequest
	case status == http.StatusUnauthorized:
		return failure.Auth
	case status == http.StatusForbidden:
		return failure.Permission
	case status == http.StatusNotFound:
		return failure.NotFound
	case status == http.StatusRequestTimeout:
		return failure.Timeout
	case status == http.StatusConflict:
		return failure.ServerError
	case status == http.StatusServiceUnavailable:
		if code == "server_is_overloaded" || headers.ContainsFold(msg, "overloaded") || strings.Contains(typ, "overloaded") {
			return failure.Overloaded
		}
		return failure.ServerError
	case status == 529:
		return failure.Overloaded
	case status >= 500:
		return failure.ServerError
	case status >= 400:
		return failure.BadRequest
	}
	return classifyInBand(code, typ)
}

// classifyInBand classifies an error object that came with a success status.
func classifyInBand(code, typ string) failure.Class {
	switch {
	case code == "rate_limit_exceeded", code == "slow_down", typ == "rate_limit_error",
		typ == "rate_limit_exceeded", typ == "tokens", typ == "requests":
		return failure.RateLimited
	case code == "server_is_overloaded", strings.Contains(typ, "overloaded"):
		return failure.Overloaded
	case typ == "invalid_request_error", code == "invalid_request_error", isRequestCode(code):
		return failure.BadRequest
	case code == "invalid_api_key", typ == "authentication_error":
		return failure.Auth
	case typ == "permission_error":
		return failure.Permission
	case code == "model_not_found", typ == "not_found_error":
		return failure.NotFound
	}
	return failure.ServerError
}

// isRequestCode reports the codes of a failed Response (the Responses API's
// ResponseErrorCode) that name a problem with the request, all of them with an image it
// holds: the same request fails again, wherever it is sent.
func isRequestCode(code string) bool {
	switch code {
	case "invalid_image", "invalid_image_format", "invalid_base64_image", "invalid_image_url",
		"image_too_large", "image_too_small", "image_parse_error", "invalid_image_mode",
		"image_file_too_large", "unsupported_image_media_type", "empty_image_file",
		"failed_to_download_image", "image_file_not_found":
		return true
	}
	return false
}

// isSpecificCode reports whether code says more than the status and type do. DeepSeek, for
// one, repeats the type in the code ("code":"invalid_request_error") on its context-length
// errors, so such a code does not rule out the message fallback.
func isSpecificCode(code, typ string) bool {
	switch code {
	case "", typ, "invalid_request_error", "invalid_request", "bad_request", "badrequesterror":
		return false
	}
	return true
}

// isQuotaCode reports the OpenAI codes that mean the account cannot pay for more tokens.
func isQuotaCode(code string) bool {
	switch code {
	case "insufficient_quota", "credit_balance_exhausted", "billing_hard_limit_reached",
		"organization_usage_limit_exceeded", "organization_spend_limit_exceeded",
		"project_spend_limit_exceeded":
		return true
	}
	return strings.HasSuffix(code, "_spend_limit_exceeded")
}

// saysContextLength recognizes the context-overflow messages of servers that send no code:
// vLLM and DeepSeek ("This model's maximum context length is 4096 tokens. However, you
// requested…"), Mistral ("…too large for model with 32768 maximum context length").
func saysContextLength(msg string) bool {
	return headers.ContainsFold(msg, "context length") || headers.ContainsFold(msg, "context_length") ||
		headers.ContainsFold(msg, "context window") || headers.ContainsFold(msg, "maximum context")
}

// parseVendorError reads the error fields from any known body shape.
func parseVendorError(body []byte) vendorError {
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		var list []json.RawMessage
		if json.Unmarshal(body, &list) != nil || len(list) == 0 {
			return vendorError{}
		}
		body = list[0]
	}
	var env struct {
		Error json.RawMessage `json:"error"`
		// vLLM's older flat shape.
		Object  string      `json:"object"`
		Message looseString `json:"message"`
		Type    looseString `json:"type"`
		Param   looseString `json:"param"`
		Code    looseString `json:"code"`
	}
	if len(body) == 0 || body[0] != '{' || json.Unmarshal(body, &env) != nil {
		return vendorError{}
	}
	raw := bytes.TrimSpace(env.Error)
	switch {
	case len(raw) > 0 && raw[0] == '{':
		var obj struct {
			Message    looseString `json:"message"`
			Type       looseString `json:"type"`
			Param      looseString `json:"param"`
			Code       looseString `json:"code"`
			Status     looseString `json:"status"`
			InnerError *struct {
				Code looseString `json:"code"`
			} `json:"innererror"`
			InnerError2 *struct {
				Code looseString `json:"code"`
			} `json:"inner_error"`
		}
		if json.Unmarshal(raw, &obj) != nil {
			return vendorError{}
		}
		v := vendorError{Message: obj.Message.S, Type: obj.Type.S, Param: obj.Param.S, Code: obj.Code, parsed: true}
		if !obj.Status.Num {
			v.Status = obj.Status.S // Azure repeats the HTTP status here as a number
		}
		if obj.InnerError != nil {
			v.InnerCode = obj.InnerError.Code.S
		} else if obj.InnerError2 != nil {
			v.InnerCode = obj.InnerError2.Code.S
		}
		return v
	case len(raw) > 0 && raw[0] == '"':
		return vendorError{Message: jsonString(raw), parsed: true}
	case env.Object == "error" || env.Message.S != "":
		return vendorError{Message: env.Message.S, Type: env.Type.S, Param: env.Param.S, Code: env.Code, parsed: true}
	}
	return vendorError{}
}

// looseString decodes a JSON string, number or boolean as text and anything else (null,
// objects, arrays) as "", never failing, since vendors disagree on the types of code,
// param and type.
type looseString struct {
	S   string
	Num bool // the value was a JSON number
}

func (l *looseString) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*l = looseString{}
	if len(b) == 0 {
		return nil
	}
	switch c := b[0]; {
	case c == '"':
		l.S = jsonString(b)
	case c == '-' || (c >= '0' && c <= '9'):
		l.S, l.Num = string(b), true
	case c == 't' || c == 'f':
		l.S = string(b)
	}
	return nil
}

// requestID returns the vendor's request id: x-request-id (OpenAI and most compatible
// vendors), else apim-request-id (Azure).
func requestID(h http.Header) string {
	if id := h.Get("X-Request-Id"); id != "" {
		return id
	}
	return h.Get("Apim-Request-Id")
}

// truncate cuts s to at most n bytes at a UTF-8 boundary, marking the cut with "…".

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
