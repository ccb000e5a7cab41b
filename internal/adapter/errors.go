package adapter

import (
	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/httpx"
)

// NetError is a transport failure: its message is "<pkg>: <op>: <err>", and it unwraps to
// Err, so that llmclient.ClassOf sees the network error beneath.
type NetError struct {
	Pkg string // the adapter's package name, such as "anthropic"
	Op  string // what failed, such as "sending request"
	Err error
}

func (e *NetError) Error() string { return e.Pkg + ": " + e.Op + ": " + e.Err.Error() }

// Unwrap returns Err.
func (e *NetError) Unwrap() error { return e.Err }

// BadRequest wraps a request the adapter cannot encode as a failure.BadRequest error, which
// the Client neither retries nor fails over. Message is err's text; err is the cause.
func BadRequest(err error) *llmclient.Error {
	return &llmclient.Error{Class: failure.BadRequest, Message: err.Error(), Err: err}
}

// Malformed reports a 2xx body that is not a usable response — a broken server or proxy, a
// transient fault — as a failure.ServerError error with the status, the request id (may be
// empty) and the message "<pkg>: <why>", followed by "; body: " and the start of body when
// it is not blank. why is the cause.
func Malformed(pkg string, status int, requestID string, body []byte, why error) *llmclient.Error {
	msg := pkg + ": " + why.Error()
	if s := httpx.Snippet(body, 64); s != "" {
		msg += "; body: " + s
	}
	return &llmclient.Error{
		Class:     failure.ServerError,
		Status:    status,
		Message:   msg,
		RequestID: requestID,
		Err:       why,
	}
}
