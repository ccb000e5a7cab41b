package llmclient

import (
	"context"

	"github.com/llmclient/llmclient/failure"
)

// Handler is what middleware wraps: the Client's two front doors.
type Handler interface {
	Complete(ctx context.Context, req *Request) (*Response, error)
	Stream(ctx context.Context, req *Request) (*Stream, error)
}

// Middleware wraps a Handler with behaviour of the user's own (request rewriting, caching,
// logging). Middleware added first is outermost. It runs once per call, outside every layer.
type Middleware func(next Handler) Handler

// HandlerFuncs adapts two functions to a Handler. A nil field is an error for that method
// when called, so middleware usually starts from the next Handler's methods:
//
//	func(next llmclient.Handler) llmclient.Handler {
//		return llmclient.HandlerFuncs{
//			CompleteFunc: func(ctx context.Context, req *llmclient.Request) (*llmclient.Response, error) {
//				// before
//				return next.Complete(ctx, req)
//			},
//			StreamFunc: next.Stream,
//		}
//	}
type HandlerFuncs struct {
	CompleteFunc func(ctx context.Context, req *Request) (*Response, error)
	StreamFunc   func(ctx context.Context, req *Request) (*Stream, error)
}

// Complete calls CompleteFunc.
func (h HandlerFuncs) Complete(ctx context.Context, req *Request) (*Response, error) {
	if h.CompleteFunc == nil {
		return nil, &Error{Class: failure.BadRequest, Err: ErrUnsupported, Message: "middleware has no CompleteFunc"}
	}
	return h.CompleteFunc(ctx, req)
}

// Stream calls StreamFunc.
func (h HandlerFuncs) Stream(ctx context.Context, req *Request) (*Stream, error) {
	if h.StreamFunc == nil {
		return nil, &Error{Class: failure.BadRequest, Err: ErrUnsupported, Message: "middleware has no StreamFunc"}
	}
	return h.StreamFunc(ctx, req)
}
