package llmclient

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
)

// Class is the kind of a failure, the same for every vendor. The zero value ClassNone means
// no failure.
type Class uint8

// The failure classes. See DefaultDecision for what the Client does with each.
const (
	ClassNone              Class = iota // no error
	ClassUnknown                        // an error no rule recognizes
	ClassRateLimited                    // 429 and the like: slow down, the key cools down
	ClassQuotaExhausted                 // billing, spend limit, prepaid credits: no retry
	ClassOverloaded                     // the vendor's capacity (Anthropic 529, 503 overloaded)
	ClassServerError                    // 500, 502, 503, 504
	ClassTimeout                        // the per-attempt timeout or a network timeout
	ClassNetwork                        // connection refused or reset, DNS, TLS
	ClassBadRequest                     // 400, 413, 422: the request itself is wrong
	ClassContextLength                  // the prompt does not fit the model's context
	ClassContentFiltered                // a safety filter or refusal
	ClassAuth                           // 401: the key is wrong or revoked
	ClassPermission                     // 403
	ClassNotFound                       // 404: model or path unknown
	ClassEmptyOutput                    // reasoning only, no content
	ClassCanceled                       // the caller's context was canceled
	ClassStreamInterrupted              // a stream broke after its first token
	ClassUnavailable                    // no upstream could be tried: breakers open, keys cooling or evicted
	ClassBudgetExceeded                 // a budget's cap (WithBudget) left no room for the call: no call made
	ClassUnpriced                       // a budget (WithBudget) cannot price the call's model: no call made
	numClasses
)

var classNames = [numClasses]string{
	ClassNone:              "none",
	ClassUnknown:           "unknown",
	ClassRateLimited:       "rate_limited",
	ClassQuotaExhausted:    "quota_exhausted",
	ClassOverloaded:        "overloaded",
	ClassServerError:       "server_error",
	ClassTimeout:           "timeout",
	ClassNetwork:           "network",
	ClassBadRequest:        "bad_request",
	ClassContextLength:     "context_length",
	ClassContentFiltered:   "content_filtered",
	ClassAuth:              "auth",
	ClassPermission:        "permission",
	ClassNotFound:          "not_found",
	ClassEmptyOutput:       "empty_output",
	ClassCanceled:          "canceled",
	ClassStreamInterrupted: "stream_interrupted",
	ClassUnavailable:       "unavailable",
	ClassBudgetExceeded:    "budget_exceeded",
	ClassUnpriced:          "unpriced",
}

// String returns the class's snake_case name, such as "rate_limited".
func (c Class) String() string {
	if c < numClasses {
		return classNames[c]
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// ClassOf reports the class of any error: the Class of an *Error in its chain, else a class
// inferred from context errors, timeouts and network errors. ClassOf(nil) is ClassNone.
func ClassOf(err error) Class {
	if err == nil {
		return ClassNone
	}
	var e *Error
	if errors.As(err, &e) && e.Class != ClassNone {
		return e.Class
	}
	return classifyCause(err)
}

// classifyCause infers the class of an error that carries no *Error.
func classifyCause(err error) Class {
	switch {
	case errors.Is(err, ErrCircuitOpen), errors.Is(err, ErrNoKey), errors.Is(err, ErrNoUpstream):
		return ClassUnavailable
	case errors.Is(err, ErrRateLimited):
		return ClassRateLimited
	case errors.Is(err, ErrFirstTokenTimeout), errors.Is(err, ErrIdleTimeout), errors.Is(err, ErrAttemptTimeout):
		return ClassTimeout
	case errors.Is(err, ErrStreamInterrupted):
		return ClassStreamInterrupted
	case errors.Is(err, context.Canceled):
		return ClassCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return ClassTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ClassTimeout
	}
	var dnsErr *net.DNSError
	var opErr *net.OpError
	switch {
	case errors.As(err, &dnsErr), errors.As(err, &opErr),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF): // a server that closed the connection before answering
		return ClassNetwork
	}
	return ClassUnknown
}
