package adapter_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/adapter"
	"github.com/llmclient/llmclient/internal/httpx"
)

const key = "sk-test-0123456789"

// roundTrip is an http.RoundTripper that answers every request with resp() or err, so
// that no network is involved.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// trackedBody records whether it was closed.
type trackedBody struct {
	io.Reader
	closed bool
}

func (b *trackedBody) Close() error { b.closed = true; return nil }

// classifyEcho classifies by status and copies the body into the message, so tests can
// see what Send read and whether the key was redacted.
func classifyEcho(status int, h http.Header, body []byte, now time.Time) *llmclient.Error {
	if now.IsZero() {
		panic("zero now")
	}
	return &llmclient.Error{Class: failure.RateLimited, Status: status, Message: string(body), RequestID: h.Get("X-Request-Id")}
}

func sender(rt roundTrip) *adapter.Sender {
	return &adapter.Sender{Pkg: "vendor", Client: &http.Client{Transport: rt}, Classify: classifyEcho}
}

func newRequest(t *testing.T) *http.Request {
	t.Helper()
	req, err := httpx.NewPost(context.Background(), "http://127.0.0.1:1/v1", []byte("{}"), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestSendSuccess(t *testing.T) {
	body := &trackedBody{Reader: strings.NewReader("ok")}
	s := sender(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 204, Header: http.Header{}, Body: body}, nil
	})
	resp, err := s.Send(newRequest(t), "m", key)
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("Send = %v, %v", resp, err)
	}
	if body.closed {
		t.Error("a 2xx body must stay open for the caller")
	}
}

func TestSendErrorStatus(t *testing.T) {
	tests := []struct {
		name    string
		body    io.Reader
		wantMsg string
		readErr bool // the read error must become the cause
	}{
		{"body read", strings.NewReader("slow down, " + key), "slow down, [REDACTED]", false},
		{"body cut at the limit", io.LimitReader(neverEnding('x'), httpx.MaxErrorBody+10), strings.Repeat("x", httpx.MaxErrorBody), false},
		{"read error", io.MultiReader(strings.NewReader("partial"), iotest.ErrReader(errors.New("reset by "+key))), "partial", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := &trackedBody{Reader: tt.body}
			s := sender(func(*http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: 429, Header: http.Header{"X-Request-Id": {"r1"}}, Body: body}, nil
			})
			resp, err := s.Send(newRequest(t), "model-x", key)
			var e *llmclient.Error
			if resp != nil || !errors.As(err, &e) {
				t.Fatalf("Send = %v, %v; want an *llmclient.Error", resp, err)
			}
			if e.Status != 429 || e.Model != "model-x" || e.RequestID != "r1" || e.Message != tt.wantMsg {
				t.Errorf("error status %d, model %q, request id %q, message %.40q", e.Status, e.Model, e.RequestID, e.Message)
			}
			if !body.closed {
				t.Error("error body not closed")
			}
			if !tt.readErr && e.Err != nil {
				t.Errorf("cause = %v, want none", e.Err)
			}
			if tt.readErr && (e.Err == nil || !strings.Contains(e.Err.Error(), "reset by")) {
				t.Errorf("cause = %v, want the read error", e.Err)
			}
			if strings.Contains(e.Error(), key) {
				t.Errorf("key leaked: %q", e.Error())
			}
		})
	}
}

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

func TestSendTransportError(t *testing.T) {
	boom := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	s := sender(func(*http.Request) (*http.Response, error) { return nil, boom })
	_, err := s.Send(newRequest(t), "m", key)
	var ne *adapter.NetError
	if !errors.As(err, &ne) || !strings.HasPrefix(err.Error(), "vendor: sending request: ") {
		t.Fatalf("err = %v, want a vendor: sending request: *NetError", err)
	}
	var op *net.OpError
	if !errors.As(err, &op) {
		t.Error("the network error is not in the chain")
	}
	if c := llmclient.ClassOf(err); c != failure.Network {
		t.Errorf("class = %v, want network", c)
	}
}

func TestReadBody(t *testing.T) {
	s := sender(nil)
	resp := &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(`{"ok":true}`))}
	if data, err := s.ReadBody(resp, "r1", "m"); err != nil || string(data) != `{"ok":true}` {
		t.Fatalf("ReadBody = %q, %v", data, err)
	}

	resp = &http.Response{StatusCode: 200, Body: io.NopCloser(io.LimitReader(neverEnding(' '), httpx.MaxResponseBody+1))}
	_, err := s.ReadBody(resp, "r1", "m")
	var e *llmclient.Error
	if !errors.As(err, &e) || e.Class != failure.ServerError || e.Status != 200 || e.RequestID != "r1" || e.Model != "m" ||
		!errors.Is(err, httpx.ErrTooLarge) || !strings.HasPrefix(e.Message, "vendor: ") {
		t.Errorf("too large: %+v", err)
	}

	resp = &http.Response{StatusCode: 200, Body: io.NopCloser(iotest.ErrReader(io.ErrUnexpectedEOF))}
	_, err = s.ReadBody(resp, "", "m")
	var ne *adapter.NetError
	if !errors.As(err, &ne) || !errors.Is(err, io.ErrUnexpectedEOF) || err.Error() != "vendor: reading response: unexpected EOF" {
		t.Errorf("read error: %v", err)
	}
}

func TestErrors(t *testing.T) {
	why := errors.New("unexpected end of JSON input")
	e := adapter.Malformed("vendor", 200, "req-1", []byte("<html>\n proxy  </html>"), why)
	if e.Class != failure.ServerError || e.Status != 200 || e.RequestID != "req-1" || !errors.Is(e, why) ||
		e.Message != "vendor: unexpected end of JSON input; body: <html> proxy </html>" {
		t.Errorf("Malformed = %+v", e)
	}
	if e := adapter.Malformed("vendor", 200, "", []byte("  \n"), why); e.Message != "vendor: unexpected end of JSON input" {
		t.Errorf("blank body: message %q", e.Message)
	}
	bad := errors.New("vendor: request has no messages")
	if e := adapter.BadRequest(bad); e.Class != failure.BadRequest || e.Message != bad.Error() || !errors.Is(e, bad) {
		t.Errorf("BadRequest = %+v", e)
	}
}
