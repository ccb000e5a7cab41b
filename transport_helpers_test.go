package llmclient_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/openai"
)

// memTransport serves requests in-process with an http.Handler: the handler runs in its
// own goroutine and its response streams through a pipe, so it works inside a synctest
// bubble. The request's context ends the response, as a network transport does.
type memTransport struct{ h http.Handler }

func (m memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	w := &memWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			w.WriteHeader(http.StatusOK)
			if req.Body != nil { // before the answer's end, which a test may check the close at
				_ = req.Body.Close()
			}
			_ = pw.Close()
		}()
		m.h.ServeHTTP(w, req)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		_ = pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	stop := context.AfterFunc(req.Context(), func() { _ = pr.CloseWithError(context.Cause(req.Context())) })
	return &http.Response{
		Status: http.StatusText(w.status), StatusCode: w.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: &memBody{PipeReader: pr, stop: stop}, ContentLength: -1, Request: req,
	}, nil
}

type memWriter struct {
	header http.Header
	sent   http.Header
	status int
	pw     *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
}

func (w *memWriter) Header() http.Header { return w.header }

func (w *memWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.status, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *memWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(p)
}

func (w *memWriter) Flush() {}

type memBody struct {
	*io.PipeReader
	stop func() bool
}

func (b *memBody) Close() error {
	b.stop()
	return b.PipeReader.Close()
}

// countingTransport counts the response bodies its base opens and closes.
type countingTransport struct {
	base           http.RoundTripper
	opened, closed atomic.Int64
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	c.opened.Add(1)
	resp.Body = &countedBody{ReadCloser: resp.Body, n: &c.closed}
	return resp, nil
}

type countedBody struct {
	io.ReadCloser
	n    *atomic.Int64
	once sync.Once
}

func (b *countedBody) Close() error {
	b.once.Do(func() { b.n.Add(1) })
	return b.ReadCloser.Close()
}

// seen is one request an upstream received.
type seen struct {
	Method, Path, Query string
	Header              http.Header
	Body                string
}

// script is an upstream that answers its n-th request with steps[n] (the last step
// repeats) and records every request. Safe for concurrent use.
type script struct {
	mu    sync.Mutex
	steps []func(w http.ResponseWriter, r *http.Request)
	got   []seen
}

func newScript(steps ...func(w http.ResponseWriter, r *http.Request)) *script {
	return &script{steps: steps}
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
	}
	s.mu.Lock()
	n := len(s.got)
	s.got = append(s.got, seen{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: string(body)})
	step := s.steps[min(n, len(s.steps)-1)]
	s.mu.Unlock()
	step(w, r)
}

func (s *script) requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.got...)
}

func (s *script) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

// hostMux routes in-process requests by host, for several upstreams on one memTransport.
type hostMux map[string]http.Handler

func (m hostMux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, ok := m[r.URL.Host]
	if !ok {
		http.Error(w, "no such host", http.StatusBadGateway)
		return
	}
	h.ServeHTTP(w, r)
}

// Steps.

func status(code int, body string, kv ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(kv); i += 2 {
			w.Header().Set(kv[i], kv[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

func ok(body string) func(http.ResponseWriter, *http.Request) { return status(200, body) }

const chatOK = `{"id":"c1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`

const err503 = `{"error":{"message":"upstream busy","type":"server_error","code":null}}`

// sseStep streams events, each after its delay; a negative delay stalls until the client
// goes away.
type ev struct {
	delay time.Duration
	data  string
}

func sseStep(events ...ev) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		for _, e := range events {
			if e.delay < 0 {
				<-r.Context().Done()
				return
			}
			select {
			case <-time.After(e.delay):
			case <-r.Context().Done():
				return
			}
			if _, err := io.WriteString(w, e.data); err != nil {
				return
			}
		}
	}
}

func chunk(text string) string {
	return `data: {"id":"s1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"` + text + `"},"finish_reason":null}]}` + "\n\n"
}

const (
	roleChunk = `data: {"id":"s1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}` + "\n\n"
	stopChunk = `data: {"id":"s1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	done      = "data: [DONE]\n\n"
)

// oaiUpstream registers an OpenAI-dialect upstream at baseURL.
func oaiUpstream(t testing.TB, name, baseURL string, keys ...string) llmclient.Option {
	t.Helper()
	p, err := openai.New(openai.WithBaseURL(baseURL))
	if err != nil {
		t.Fatal(err)
	}
	return llmclient.WithUpstream(llmclient.Upstream{Name: name, Provider: p, Keys: keys})
}

// post sends a JSON POST through rt.
func post(t *testing.T, ctx context.Context, rt http.RoundTripper, url, body string, hdr ...string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return rt.RoundTrip(req)
}

// readBody reads and closes a response body.
func readBody(t *testing.T, resp *http.Response) (string, error) {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// fast are options that keep retries quick in real time.
func fast() []llmclient.Option {
	return []llmclient.Option{llmclient.WithBackoff(time.Millisecond, 2*time.Millisecond)}
}
