package llmclient

import (
	"context"
	"errors"
	"net"
	"strings"
	"unicode/utf8"

	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/keysource"
	"github.com/llmclient/llmclient/limitstore"
)

// ErrorSummary returns a text of err that holds nothing of a call's content, for logs and
// traces that must not hold prompts or completions: for an *Error, "llmclient: <class>:
// upstream "<name>": status <n>: <vendor code or type>", each part when known, then the
// cause when it is one of llmclient's sentinel errors (ErrRateLimited, ErrClosed,
// budget.ErrExceeded, …), a context error or a network error — that error's own text,
// never that of an error wrapping it. The vendor's message, a body snippet and a refusal,
// which may quote the prompt or the answer, are left out. For an error that is no *Error
// it is the text of such a cause, or "" when there is none. The vendor code or type is cut
// at 64 bytes. ErrorSummary(nil) is "".
func ErrorSummary(err error) string {
	var e *Error
	if !errors.As(err, &e) {
		return safeCause(err)
	}
	var b strings.Builder
	e.writeHead(&b, maxSummaryCode)
	if cause := safeCause(e.Err); cause != "" {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(cause, "llmclient: "))
	}
	return b.String()
}

// maxSummaryCode bounds a vendor's error code or type in ErrorSummary: an upstream could
// put anything there.
const maxSummaryCode = 64

// cut returns s cut to at most n bytes, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// safeCause returns the text of the first cause down err's chain that holds nothing of a
// call's content (see safeText), or "".
func safeCause(err error) string {
	for err != nil {
		if text, ok := safeText(err); ok {
			return text
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if text := safeCause(e); text != "" {
					return text
				}
			}
			return ""
		default:
			return ""
		}
	}
	return ""
}

// safeText returns err's text when err itself is a sentinel error of llmclient, a context
// error or a network error that wraps no *Error (an *url.Error around a Client
// transport's error quotes that error's text).
func safeText(err error) (string, bool) {
	for _, s := range sentinels {
		if err == s {
			return err.Error(), true
		}
	}
	if err == context.Canceled || err == context.DeadlineExceeded {
		return err.Error(), true
	}
	if ne, ok := err.(net.Error); ok {
		var e *Error
		if !errors.As(ne, &e) {
			return ne.Error(), true
		}
	}
	return "", false
}

// sentinels are the errors of fixed text a call's error may wrap.
var sentinels = [...]error{ErrCircuitOpen, ErrRateLimited, ErrNoKey, ErrNoUpstream, ErrRetryBudget,
	ErrAttemptTimeout, ErrFirstTokenTimeout, ErrIdleTimeout, ErrStreamInterrupted, ErrStreamTimeout,
	ErrUnsupported, ErrContextWindow, ErrPanicked, ErrClosed, ErrDimensionMismatch, ErrContinuationDiverged,
	ErrThroughputFloor, ErrSDKRetry, budget.ErrExceeded, budget.ErrNoPrice, budget.ErrCostlyFailover,
	keysource.ErrFailed, limitstore.ErrRefused}
