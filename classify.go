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
}

// String returns the class's snake_case name, such as "rate_limited".
func (c Class) String() string {
	if c < numClasses {
		return classNames[c]
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// Classes returns every failure class, ClassNone excluded, in declaration order.
func Classes() []Class {
	out := make([]Class, 0, numClasses-1)
	for c := ClassUnknown; c < numClasses; c++ {
		out = append(out, c)
	}
	return out
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

// Decision is what the Client does after an attempt fails with a given class.
// Users override rows with WithDecision; DefaultDecision gives the built-in table.
type Decision struct {
	// Retry tries the same upstream again, after Retry-After or backoff (or at once on
	// another key when the failure was the key's).
	Retry bool
	// Failover moves the request to the next upstream in its chain once this one gives up.
	Failover bool
	// Breaker counts the failure toward the upstream's circuit breaker.
	Breaker bool
	// Cooldown pauses the key for every caller until the Retry-After (or the default
	// cooldown when the upstream gave none).
	Cooldown bool
	// Evict takes the key out of its pool for the key eviction time.
	Evict bool
	// Alert emits an EventAlert to the observer.
	Alert bool
}

// DefaultDecision returns the built-in decision for class c, the table in the README:
//
//	class              retry  failover  breaker  key
//	rate_limited       yes    yes       no       cooldown
//	quota_exhausted    no     yes       no       evict, alert
//	overloaded         yes    yes       yes
//	server_error       yes    yes       yes
//	timeout            yes    yes       yes
//	network            yes    yes       yes
//	bad_request        no     no        no
//	context_length     no     no*       no       (* only to WithContextFallback)
//	content_filtered   no     no*       no       (* only to WithContentFallback)
//	auth               yes**  no        no       evict, alert (** on another key only)
//	permission         no     no        no
//	not_found          no     no        no
//	empty_output       once   no        no       (with a larger output budget)
//	canceled           no     no        no
//	stream_interrupted no     no        yes
//	unavailable        no     yes       no
//	unknown            no     no        no
func DefaultDecision(c Class) Decision {
	switch c {
	case ClassRateLimited:
		return Decision{Retry: true, Failover: true, Cooldown: true}
	case ClassQuotaExhausted:
		return Decision{Failover: true, Evict: true, Alert: true}
	case ClassOverloaded, ClassServerError, ClassTimeout, ClassNetwork:
		return Decision{Retry: true, Failover: true, Breaker: true}
	case ClassAuth:
		return Decision{Retry: true, Evict: true, Alert: true}
	case ClassEmptyOutput:
		return Decision{Retry: true}
	case ClassStreamInterrupted:
		return Decision{Breaker: true}
	case ClassUnavailable:
		return Decision{Failover: true}
	}
	return Decision{}
}

// decisionTable is the per-class decisions a Client uses, built once in New.
type decisionTable [numClasses]Decision

func defaultDecisionTable() decisionTable {
	var t decisionTable
	for c := Class(0); c < numClasses; c++ {
		t[c] = DefaultDecision(c)
	}
	return t
}
