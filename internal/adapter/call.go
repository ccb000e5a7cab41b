package adapter

import (
	"errors"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/httpx"
)

// CheckCall is the first step of sending a call for an adapter that needs a key: a nil
// call or request is a failure.BadRequest error "<pkg>: nil call or request"; an empty key a
// failure.Auth error with Model set and noKey as the cause; a key that cannot be sent in a
// header a failure.BadRequest error that does not echo it. It returns nil when the call can
// be sent.
func CheckCall(pkg string, call *llmclient.Call, key string, noKey error) *llmclient.Error {
	switch {
	case call == nil || call.Request == nil:
		return BadRequest(errors.New(pkg + ": nil call or request"))
	case key == "":
		return &llmclient.Error{Class: failure.Auth, Model: call.Model, Err: noKey}
	case !httpx.ValidHeaderValue(key):
		return BadRequest(errors.New(pkg + ": API key contains characters not allowed in a header"))
	}
	return nil
}
