package llmclient

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/ratelimit"
)

// Sentinel errors for decisions the Client makes itself. Match them with errors.Is; the
// *Error that carries them says which upstream and attempt they belong to.
var (
	// ErrCircuitOpen: the upstream's circuit breaker is open or its half-open probes are
	// taken. It is breaker.ErrOpen.
	ErrCircuitOpen = breaker.ErrOpen
	// ErrRateLimited: the local limiter could not admit the request in time.
	ErrRateLimited = errors.New("llmclient: rate limited locally")
	// ErrNoKey: every key of the upstream is cooling down or evicted.
	ErrNoKey = errors.New("llmclient: no usable API key")
	// ErrNoUpstream: no upstream serves the request's model.
	ErrNoUpstream = errors.New("llmclient: no upstream for model")
	// ErrRetryBudget: the client-wide retry budget is spent, so a retry was not made.
	ErrRetryBudget = errors.New("llmclient: retry budget exhausted")
	// ErrAttemptTimeout: the per-attempt timeout fired.
	ErrAttemptTimeout = errors.New("llmclient: attempt timeout")
	// ErrFirstTokenTimeout: a stream sent no content token within the first-token timeout.
	ErrFirstTokenTimeout = errors.New("llmclient: first-token timeout")
	// ErrIdleTimeout: a stream sent no data event within the idle timeout.
	ErrIdleTimeout = errors.New("llmclient: stream idle timeout")
	// ErrStreamInterrupted: a stream broke after its first token.
	ErrStreamInterrupted = errors.New("llmclient: stream interrupted")
	// ErrStreamTimeout: a stream exceeded its total timeout.
	ErrStreamTimeout = errors.New("llmclient: stream total timeout")
	// ErrUnsupported: the provider does not support the operation.
	ErrUnsupported = errors.New("llmclient: unsupported by provider")
	// ErrContextWindow: the request's estimate exceeds its model's context window by more
	// than the estimate's error, so no call was made (class context_length; see
	// WithPricing).
	ErrContextWindow = errors.New("llmclient: request exceeds the model's context window")
	// ErrPanicked: a Stream's end was interrupted by a panic (an observer's, on the
	// stream's last event); a Stream's taps (Stream.Tap) hear it as the end's error while
	// the panic goes on to the reader.
	ErrPanicked = errors.New("llmclient: the stream's end panicked")
)

// Error is the error every Client call returns: the failure's class, where it happened and
// the vendor's own words. Adapters return it for vendor error responses. Its message starts
// with "llmclient:" and never contains an API key.
type Error struct {
	Class    failure.Class
	Upstream string
	Model    string
	// Status is the HTTP status, 0 when no response was received.
	Status int
	// Type, Code, Param and Message are the vendor's error fields, as sent.
	Type    string
	Code    string
	Param   string
	Message string
	// RequestID is the vendor's request id, for support tickets.
	RequestID string
	// RetryAfter is the wait the upstream asked for (headers or body hints), 0 when none.
	// An upstream's "Retry-After: 0" is 0 too: the retry then waits its jittered backoff
	// (WithBackoff), never at once — a zero wait from every key of a busy upstream would
	// make a retry storm.
	RetryAfter time.Duration
	// AdmitAfter is, for a local refusal (the limiter could not admit in time, every key
	// is cooling down or evicted), how long the Client's own limits would have made the
	// request wait — for evicted keys, until the first eviction ends; 0 otherwise. It is
	// not a Retry-After: no upstream asked for it.
	AdmitAfter time.Duration
	// ShouldRetry is the upstream's x-should-retry header: nil when absent.
	ShouldRetry *bool
	// RateLimits is the quota state the upstream reported with the error, if any.
	RateLimits *ratelimit.Status
	// Attempts is the whole attempt trace of the call.
	Attempts []Attempt
	// Partial holds what a stream produced before it broke (failure.StreamInterrupted, or
	// the class of the continuation that failed after it: WithStreamContinuation), or the
	// filtered response (failure.ContentFiltered, failure.EmptyOutput). Nil otherwise.
	Partial *Response
	// Cost is what the failed call's attempts cost together (see WithPricing): attempts
	// that failed can still bill, such as a stream cut after its first tokens or a
	// timeout after the upstream began generating. Unknown without pricing. It is set on
	// a call's final error, not on the errors of single attempts in Attempts.
	Cost pricing.Cost
	// Err is the underlying cause: a sentinel, a network error, a context error or nil.
	Err error
}

// Error formats the failure as "llmclient: <class>: upstream X: status N: code: message
// (N attempts): cause".
func (e *Error) Error() string {
	var b strings.Builder
	e.writeSummary(&b)
	if n := len(e.Attempts); n > 1 {
		b.WriteString(" (")
		b.WriteString(strconv.Itoa(n))
		b.WriteString(" attempts)")
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(e.Err.Error(), "llmclient: "))
	}
	return b.String()
}

// summary is the error's message without the attempt count and the cause's details
// beyond a sentinel's text.
func (e *Error) summary() string {
	var b strings.Builder
	e.writeSummary(&b)
	if e.Status == 0 && e.Message == "" && e.Err != nil {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(e.Err.Error(), "llmclient: "))
	}
	return b.String()
}

func (e *Error) writeSummary(b *strings.Builder) {
	e.writeHead(b, len(e.Code)+len(e.Type))
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
}

// writeHead writes what names e without the vendor's message: "llmclient: <class>",
// then its upstream, status and vendor code (or type) when known, the code cut to
// maxCode bytes.
func (e *Error) writeHead(b *strings.Builder, maxCode int) {
	b.WriteString("llmclient: ")
	b.WriteString(e.Class.String())
	if e.Upstream != "" {
		b.WriteString(": upstream ")
		b.WriteString(strconv.Quote(e.Upstream))
	}
	if e.Status != 0 {
		b.WriteString(": status ")
		b.WriteString(strconv.Itoa(e.Status))
	}
	if code := e.Code; code != "" || e.Type != "" {
		if code == "" {
			code = e.Type
		}
		b.WriteString(": ")
		b.WriteString(cut(code, maxCode))
	}
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrStreamInterrupted) true for every failure.StreamInterrupted
// error, whatever its cause (a cut connection, an idle timeout, an error event).
func (e *Error) Is(target error) bool {
	return target == ErrStreamInterrupted && e.Class == failure.StreamInterrupted
}

// Temporary reports whether the class is one that a later call may not see again.
func (e *Error) Temporary() bool {
	switch e.Class {
	case failure.RateLimited, failure.Overloaded, failure.ServerError, failure.Timeout, failure.Network,
		failure.Unavailable, failure.StreamInterrupted:
		return true
	}
	return false
}

// redactedError hides a secret in a cause's message while keeping its chain for errors.Is.
type redactedError struct {
	msg string
	err error
}

func (r *redactedError) Error() string { return r.msg }
func (r *redactedError) Unwrap() error { return r.err }

// Redact removes secret from every text field of e and from its cause's message (keeping
// the cause's chain for errors.Is). Adapters call it with the key a call used before an
// error leaves them; the Client calls it again with the pool key of every attempt.
func (e *Error) Redact(secret string) {
	if secret == "" {
		return
	}
	e.Message = redactString(e.Message, secret)
	e.Param = redactString(e.Param, secret)
	e.Type = redactString(e.Type, secret)
	e.Code = redactString(e.Code, secret)
	if e.Err != nil {
		if msg := e.Err.Error(); redactString(msg, secret) != msg {
			e.Err = &redactedError{msg: redactString(msg, secret), err: e.Err}
		}
	}
}

// redacted replaces a secret in redacted text.
const redacted = "[REDACTED]"

// redactString replaces every occurrence of secret in s, and a secret cut short where a
// vendor message or a snippet of an error body was truncated.
func redactString(s, secret string) string {
	if secret == "" {
		return s
	}
	if strings.Contains(s, secret) {
		s = strings.ReplaceAll(s, secret, redacted)
	}
	return redactCut(s, secret)
}

// minRedactCut is the shortest start of a secret that redactCut treats as the secret.
const minRedactCut = 8

// redactCut redacts a secret that truncation cut short: a start of it, at least
// minRedactCut bytes long, that ends the text or stands just before an ellipsis. Secrets
// no longer than that are only redacted whole.
func redactCut(s, secret string) string {
	if len(secret) <= minRedactCut {
		return s
	}
	head := secret[:minRedactCut]
	for i := 0; i < len(s); {
		j := strings.Index(s[i:], head)
		if j < 0 {
			break
		}
		j += i
		k := j + minRedactCut
		for k < len(s) && k-j < len(secret) && s[k] == secret[k-j] {
			k++
		}
		rest := s[k:]
		if rest == "" || strings.HasPrefix(rest, "…") || strings.HasPrefix(rest, "...") {
			s = s[:j] + redacted + rest
			i = j + len(redacted)
			continue
		}
		i = j + 1
	}
	return s
}
