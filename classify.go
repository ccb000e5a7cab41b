package llmclient

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/llmclient/llmclient/failure"
)

// ClassOf reports the class of any error: the Class of an *Error in its chain, else a class
// inferred from context errors, timeouts and network errors. ClassOf(nil) is failure.None.
func ClassOf(err error) failure.Class {
	if err == nil {
		return failure.None
	}
	var e *Error
	if errors.As(err, &e) && e.Class != failure.None {
		return e.Class
	}
	return classifyCause(err)
}

// classifyCause infers the class of an error that carries no *Error.
func classifyCause(err error) failure.Class {
	switch {
	case errors.Is(err, ErrCircuitOpen), errors.Is(err, ErrNoKey), errors.Is(err, ErrNoUpstream):
		return failure.Unavailable
	case errors.Is(err, ErrRateLimited):
		return failure.RateLimited
	case errors.Is(err, ErrFirstTokenTimeout), errors.Is(err, ErrIdleTimeout), errors.Is(err, ErrAttemptTimeout):
		return failure.Timeout
	case errors.Is(err, ErrStreamInterrupted):
		return failure.StreamInterrupted
	case errors.Is(err, context.Canceled):
		return failure.Canceled
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return failure.Timeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return failure.Timeout
	}
	var dnsErr *net.DNSError
	var opErr *net.OpError
	switch {
	case errors.As(err, &dnsErr), errors.As(err, &opErr),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF): // a server that closed the connection before answering
		return failure.Network
	}
	return failure.Unknown
}

const numClasses = failure.Unpriced + 1
