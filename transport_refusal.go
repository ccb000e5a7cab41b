package llmclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/llmclient/llmclient/failure"
)

// A request the transport refuses without an upstream answer — an open breaker, every
// key cooling down, the limiter or a budget leaving no room — is answered with an error
// response in the addressed upstream's own error format, so that the SDK reports it as
// its own API error type (openai-go's *openai.Error, anthropic-sdk-go's *anthropic.Error,
// genai's APIError) with the status an SDK user's error handling already expects:
//
//   - 429 for a refusal by the Client's limits (failure.RateLimited) or a budget
//     (failure.BudgetExceeded);
//   - 403 for a request a budget cannot price and refuses by its Unpriced policy
//     (failure.Unpriced): a policy, not a load, so no SDK retries it;
//   - 503 for an upstream that cannot be tried now (failure.Unavailable: breakers open,
//     keys evicted, no upstream of the route speaks the request's shape), except 429 when
//     every key is cooling down after the upstream's rate limits.
//
// It carries Retry-After (whole seconds, rounded up) when the Client knows when the
// refusal ends (the limiter's admission time, a cooling key's Retry-After, the breaker's
// remaining open time), "X-Should-Retry: false" (the transport has already retried), and
// "X-Llmclient-Class" with the refusal's class name. Network failures and timeouts, where
// the upstream was tried and gave no response, stay errors of the round trip: the SDK
// reports them as it would without the transport.

// refusalFlavor is the error body format of an upstream's dialect.
type refusalFlavor uint8

const (
	flavorOpenAI    refusalFlavor = iota // {"error":{"message","type","param","code"}}
	flavorAnthropic                      // {"type":"error","error":{"type","message"}}
	flavorGemini                         // {"error":{"code","message","status"}}
)

// flavorOf tells a dialect's error format by the API paths it recognizes.
func flavorOf(d Dialect) refusalFlavor {
	for _, p := range [...]string{"/v1/messages", "/messages"} {
		if _, ok := d.Inspect(http.MethodPost, p, nil); ok {
			return flavorAnthropic
		}
	}
	if _, ok := d.Inspect(http.MethodPost, "/models/m:generateContent", nil); ok {
		return flavorGemini
	}
	return flavorOpenAI
}

// headerClass names the class of a refusal the transport answered itself.
const headerClass = "X-Llmclient-Class"

// localRefusal reports whether e is a refusal made without any upstream response.
func localRefusal(e *Error) bool {
	if e == nil || e.Status != 0 || errors.Is(e, ErrSDKRetry) {
		return false
	}
	switch e.Class {
	case failure.RateLimited, failure.BudgetExceeded, failure.Unpriced, failure.Unavailable:
	default:
		return false
	}
	return len(e.Attempts) == 0 || e.Attempts[len(e.Attempts)-1].Local
}

// refusal answers req, addressed to m, with e as the dialect's error response; ok is false
// when e is not a local refusal (it is then returned as the round trip's error).
func (t *Transport) refusal(m *txUpstream, req *http.Request, err error) (*http.Response, bool) {
	var e *Error
	if !errors.As(err, &e) || !localRefusal(e) {
		return nil, false
	}
	status, kind := http.StatusServiceUnavailable, "unavailable"
	switch e.Class {
	case failure.RateLimited:
		status, kind = http.StatusTooManyRequests, "rate_limited"
	case failure.BudgetExceeded:
		status, kind = http.StatusTooManyRequests, "budget_exceeded"
	case failure.Unpriced:
		status, kind = http.StatusForbidden, "unpriced"
	default:
		switch {
		case errors.Is(e, ErrCircuitOpen):
			kind = "circuit_open"
		case errors.Is(e, ErrNoKey) && strings.Contains(e.Message, "cooling down"):
			// Every key is cooling down after the upstream's 429s: a rate limit.
			status, kind = http.StatusTooManyRequests, "keys_cooling"
		}
	}
	msg := "llmclient: " + e.Class.String() + ": request refused locally"
	if e.Upstream != "" {
		msg += " (upstream " + e.Upstream + ")"
	}
	body := refusalBody(m.flavor, status, kind, msg)
	h := http.Header{
		"Content-Type":   {"application/json"},
		"Content-Length": {strconv.Itoa(len(body))},
		"X-Should-Retry": {"false"},
		headerClass:      {e.Class.String()},
	}
	if wait := t.refusalWait(e); wait > 0 {
		secs := math.Ceil(wait.Seconds())
		h.Set("Retry-After", strconv.FormatFloat(min(secs, 1<<31), 'f', 0, 64))
	}
	return &http.Response{Status: strconv.Itoa(status) + " " + http.StatusText(status), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h, ContentLength: int64(len(body)),
		Body: io.NopCloser(bytes.NewReader(body)), Request: req, Uncompressed: true}, true
}

// refusalWait is how long the refusal e lasts, when the Client knows: the wait its limits
// or the upstream asked for, else an open breaker's remaining open time.
func (t *Transport) refusalWait(e *Error) time.Duration {
	wait := max(e.RetryAfter, e.AdmitAfter)
	for _, at := range e.Attempts {
		wait = max(wait, at.RetryAfter)
	}
	if wait <= 0 && errors.Is(e, ErrCircuitOpen) {
		if up := t.c.byName[e.Upstream]; up != nil {
			wait = up.breaker.Snapshot().OpenRemaining
		}
	}
	return wait
}

// refusalBody is the error body of a refusal in the dialect's format.
func refusalBody(f refusalFlavor, status int, kind, msg string) []byte {
	var v any
	switch f {
	case flavorAnthropic:
		typ := "overloaded_error"
		switch status {
		case http.StatusTooManyRequests:
			typ = "rate_limit_error"
		case http.StatusForbidden:
			typ = "permission_error"
		}
		v = map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
	case flavorGemini:
		st := "UNAVAILABLE"
		switch status {
		case http.StatusTooManyRequests:
			st = "RESOURCE_EXHAUSTED"
		case http.StatusForbidden:
			st = "PERMISSION_DENIED"
		}
		v = map[string]any{"error": map[string]any{"code": status, "message": msg, "status": st}}
	default:
		typ := "server_error"
		switch status {
		case http.StatusTooManyRequests:
			typ = "rate_limit_error"
		case http.StatusForbidden:
			typ = "permission_error"
		}
		v = map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": kind}}
	}
	b, _ := json.Marshal(v)
	return b
}
