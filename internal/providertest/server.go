package providertest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Request is what a Server saw of one request.
type Request struct {
	Method   string
	URI      string // the request URI: escaped path and query
	Path     string // the unescaped path
	RawQuery string
	Header   http.Header
	Body     []byte
}

// Server is a loopback httptest server that records every request and then answers it
// with the handler given to NewServer. It is safe for concurrent use.
type Server struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []Request
}

// NewServer starts a Server answering with reply; t's cleanup closes it.
func NewServer(t testing.TB, reply http.HandlerFunc) *Server {
	t.Helper()
	s := &Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, Request{
			Method: r.Method, URI: r.URL.RequestURI(), Path: r.URL.Path, RawQuery: r.URL.RawQuery,
			Header: r.Header.Clone(), Body: body,
		})
		s.mu.Unlock()
		reply(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// Last returns the latest request, failing t when there was none.
func (s *Server) Last(t testing.TB) Request {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		t.Fatal("server received no request")
	}
	return s.reqs[len(s.reqs)-1]
}

// Len returns how many requests arrived.
func (s *Server) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// Fixed replies with status, the headers kv (alternating name and value) and body. The
// Content-Type is application/json unless kv sets one.
func Fixed(status int, body string, kv ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(kv); i += 2 {
			w.Header().Set(kv[i], kv[i+1])
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// SSE replies 200 with body as a text/event-stream.
func SSE(body string) http.HandlerFunc {
	return Fixed(http.StatusOK, body, "Content-Type", "text/event-stream")
}

// Drop sends head as an event stream, then cuts the connection in the middle of the
// chunked body.
func Drop(head string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, head)
		w.(http.Flusher).Flush()
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	}
}

// Stall sends head as an event stream, then goes silent until the client goes away or
// release is closed.
func Stall(head string, release <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, head)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}
}
