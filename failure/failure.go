// Package failure names the classes of failure the Client tells apart ([Class]):
// every error a call returns has one (llmclient.ClassOf), and the Client's decision
// for each class (retry, fail over, cool the key down, open the breaker) is set with
// llmclient.WithDecision.
//
//	switch llmclient.ClassOf(err) {
//	case failure.RateLimited, failure.Overloaded:
//		// back off
//	case failure.BadRequest:
//		// fix the request
//	}
//
// Class's String method gives the snake_case name used in events, logs and metrics
// (for example "rate_limited").
package failure

import "strconv"

// Class is the kind of a failure, the same for every vendor. The zero value None means
// no failure.
type Class uint8

// The failure classes. See llmclient.DefaultDecision for what the Client does with each.
const (
	None              Class = iota // no error
	Unknown                        // an error no rule recognizes
	RateLimited                    // 429 and the like: slow down, the key cools down
	QuotaExhausted                 // billing, spend limit, prepaid credits: no retry
	Overloaded                     // the vendor's capacity (Anthropic 529, 503 overloaded)
	ServerError                    // 500, 502, 503, 504
	Timeout                        // the per-attempt timeout or a network timeout
	Network                        // connection refused or reset, DNS, TLS
	BadRequest                     // 400, 413, 422: the request itself is wrong
	ContextLength                  // the prompt does not fit the model's context
	ContentFiltered                // a safety filter or refusal
	Auth                           // 401: the key is wrong or revoked
	Permission                     // 403
	NotFound                       // 404: model or path unknown
	EmptyOutput                    // reasoning only, no content
	Canceled                       // the caller's context was canceled
	StreamInterrupted              // a stream broke after its first token
	Unavailable                    // no upstream could be tried: breakers open, keys cooling or evicted
	BudgetExceeded                 // a budget's cap (llmclient.WithBudget) left no room for the call: no call made
	Unpriced                       // a budget (llmclient.WithBudget) cannot price the call's model: no call made
	numClasses
)

var classNames = [numClasses]string{
	None:              "none",
	Unknown:           "unknown",
	RateLimited:       "rate_limited",
	QuotaExhausted:    "quota_exhausted",
	Overloaded:        "overloaded",
	ServerError:       "server_error",
	Timeout:           "timeout",
	Network:           "network",
	BadRequest:        "bad_request",
	ContextLength:     "context_length",
	ContentFiltered:   "content_filtered",
	Auth:              "auth",
	Permission:        "permission",
	NotFound:          "not_found",
	EmptyOutput:       "empty_output",
	Canceled:          "canceled",
	StreamInterrupted: "stream_interrupted",
	Unavailable:       "unavailable",
	BudgetExceeded:    "budget_exceeded",
	Unpriced:          "unpriced",
}

// String returns the class's snake_case name, such as "rate_limited".
func (c Class) String() string {
	if c < numClasses {
		return classNames[c]
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}
