package fake

import (
	"context"
	"strconv"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/ratelimit"
)

// FailStep is a step that fails the call the way a vendor's error response does: with an
// *llmclient.Error carrying Class, Status, the vendor fields, RetryAfter, ShouldRetry and
// RateLimits. Build it with Fail or FailClass. Each call gets a fresh *llmclient.Error.
type FailStep struct {
	class       failure.Class
	status      int
	typ         string
	code        string
	param       string
	message     string
	requestID   string
	retryAfter  time.Duration
	shouldRetry *bool
	rateLimits  *ratelimit.Status
	latency     time.Duration
	times       int
	forever     bool
}

// Fail returns a step that fails with HTTP status status, classed as a dialect would class
// a bare status:
//
//	429 rate_limited          400, 413, 422 bad_request
//	402 quota_exhausted       401 auth
//	503, 529 overloaded       403 permission
//	500, 502, 504 and other   404 not_found
//	    5xx server_error      408 timeout
//	other 4xx bad_request     anything else unknown
//
// Override the class with Class, as a dialect does when the body says more than the status
// (Fail(429).Class(failure.QuotaExhausted).Code("insufficient_quota")).
// The default message is "fake: status <status>".
func Fail(status int) *FailStep {
	return &FailStep{class: ClassForStatus(status), status: status, times: 1}
}

// FailClass returns a step that fails with class c and a status typical for it: 429 for
// rate_limited and quota_exhausted (as OpenAI sends insufficient_quota), 503 overloaded,
// 500 server_error, 408 timeout, 400 bad_request, context_length and content_filtered,
// 401 auth, 403 permission, 404 not_found, and 0 (no response) for the other classes.
// Override the status with Status. failure.None counts as failure.Unknown.
// The default message is "fake: status <status>", or "fake: <class>" when the status is 0.
func FailClass(c failure.Class) *FailStep {
	if c == failure.None {
		c = failure.Unknown
	}
	return &FailStep{class: c, status: StatusForClass(c), times: 1}
}

// Class sets the error's class, keeping the status.
func (s *FailStep) Class(c failure.Class) *FailStep { s.class = c; return s }

// Status sets the error's HTTP status, keeping the class.
func (s *FailStep) Status(status int) *FailStep { s.status = status; return s }

// Type sets the vendor's error type, such as "rate_limit_error". Default empty.
func (s *FailStep) Type(t string) *FailStep { s.typ = t; return s }

// Code sets the vendor's error code, such as "rate_limit_exceeded". Default empty.
func (s *FailStep) Code(code string) *FailStep { s.code = code; return s }

// Param sets the vendor's error param, such as "messages". Default empty.
func (s *FailStep) Param(p string) *FailStep { s.param = p; return s }

// Message sets the vendor's error message, replacing the default.
func (s *FailStep) Message(msg string) *FailStep { s.message = msg; return s }

// RequestID sets the vendor's request id. Default empty.
func (s *FailStep) RequestID(id string) *FailStep { s.requestID = id; return s }

// RetryAfter sets the wait the upstream asks for, as a Retry-After header would. Default 0.
func (s *FailStep) RetryAfter(d time.Duration) *FailStep { s.retryAfter = d; return s }

// ShouldRetry sets the upstream's x-should-retry answer. Default absent (nil).
func (s *FailStep) ShouldRetry(v bool) *FailStep { s.shouldRetry = &v; return s }

// RateLimits sets the quota state reported with the error, as rate-limit headers would.
// Default nil.
func (s *FailStep) RateLimits(rl ratelimit.Status) *FailStep { s.rateLimits = &rl; return s }

// Latency makes the call wait d before failing, or until its context is done. Default 0.
func (s *FailStep) Latency(d time.Duration) *FailStep { s.latency = d; return s }

// Times makes the step serve n calls (default 1); n < 1 removes it from the script.
func (s *FailStep) Times(n int) *FailStep { s.times = n; return s }

// Forever makes the step serve every call from now on; steps after it are never reached.
func (s *FailStep) Forever() *FailStep { s.forever = true; return s }

func (s *FailStep) compile(dst []entry) []entry {
	if s == nil {
		return dst
	}
	return append(dst, entry{leaf: s.clone(), times: s.times, forever: s.forever})
}

func (s *FailStep) clone() leaf {
	c := *s
	if s.shouldRetry != nil {
		v := *s.shouldRetry
		c.shouldRetry = &v
	}
	if s.rateLimits != nil {
		rl := *s.rateLimits
		c.rateLimits = &rl
	}
	return &c
}

func (s *FailStep) play(ctx context.Context, _ *llmclient.Call, _ bool, _ int) (*llmclient.Response, llmclient.ProviderStream, error) {
	if err := sleep(ctx, s.latency); err != nil {
		return nil, nil, err
	}
	return nil, nil, s.err()
}

// err builds a fresh error, since callers such as the Client annotate the one they get.
func (s *FailStep) err() *llmclient.Error {
	e := &llmclient.Error{
		Class:      s.class,
		Status:     s.status,
		Type:       s.typ,
		Code:       s.code,
		Param:      s.param,
		Message:    s.message,
		RequestID:  s.requestID,
		RetryAfter: s.retryAfter,
	}
	if e.Message == "" {
		if s.status != 0 {
			e.Message = "fake: status " + strconv.Itoa(s.status)
		} else {
			e.Message = "fake: " + s.class.String()
		}
	}
	if s.shouldRetry != nil {
		v := *s.shouldRetry
		e.ShouldRetry = &v
	}
	if s.rateLimits != nil {
		rl := *s.rateLimits
		e.RateLimits = &rl
	}
	return e
}

// ClassForStatus returns the class Fail gives HTTP status status; see Fail for the table.
func ClassForStatus(status int) failure.Class {
	switch status {
	case 429:
		return failure.RateLimited
	case 402:
		return failure.QuotaExhausted
	case 503, 529:
		return failure.Overloaded
	case 401:
		return failure.Auth
	case 403:
		return failure.Permission
	case 404:
		return failure.NotFound
	case 408:
		return failure.Timeout
	}
	switch {
	case status >= 500 && status <= 599:
		return failure.ServerError
	case status >= 400 && status <= 499:
		return failure.BadRequest
	}
	return failure.Unknown
}

// StatusForClass returns the status FailClass gives class c; see FailClass for the table.
func StatusForClass(c failure.Class) int {
	switch c {
	case failure.RateLimited, failure.QuotaExhausted:
		return 429
	case failure.Overloaded:
		return 503
	case failure.ServerError:
		return 500
	case failure.Timeout:
		return 408
	case failure.BadRequest, failure.ContextLength, failure.ContentFiltered:
		return 400
	case failure.Auth:
		return 401
	case failure.Permission:
		return 403
	case failure.NotFound:
		return 404
	}
	return 0
}

// ErrorStep is a step that fails the call with a given error, returned as it is: a
// transport failure such as a refused or reset connection. Build it with Error.
type ErrorStep struct {
	err     error
	latency time.Duration
	times   int
	forever bool
}

// Error returns a step that fails the call with err exactly as given (the same value on
// every call), the way a transport error reaches an adapter: for example
// &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, or
// fmt.Errorf("read: %w", syscall.ECONNRESET). The Client classifies it itself.
// Error(nil) fails the call with an error that says the step is malformed.
func Error(err error) *ErrorStep {
	return &ErrorStep{err: err, times: 1}
}

// Latency makes the call wait d before failing, or until its context is done. Default 0.
func (s *ErrorStep) Latency(d time.Duration) *ErrorStep { s.latency = d; return s }

// Times makes the step serve n calls (default 1); n < 1 removes it from the script.
func (s *ErrorStep) Times(n int) *ErrorStep { s.times = n; return s }

// Forever makes the step serve every call from now on; steps after it are never reached.
func (s *ErrorStep) Forever() *ErrorStep { s.forever = true; return s }

func (s *ErrorStep) compile(dst []entry) []entry {
	if s == nil {
		return dst
	}
	return append(dst, entry{leaf: s.clone(), times: s.times, forever: s.forever})
}

func (s *ErrorStep) clone() leaf { c := *s; return &c }

func (s *ErrorStep) play(ctx context.Context, _ *llmclient.Call, _ bool, _ int) (*llmclient.Response, llmclient.ProviderStream, error) {
	if err := sleep(ctx, s.latency); err != nil {
		return nil, nil, err
	}
	if s.err == nil {
		return nil, nil, misuse("fake: Error step with a nil error")
	}
	return nil, nil, s.err
}
