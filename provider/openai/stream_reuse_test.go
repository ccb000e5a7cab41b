package openai_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmclient/llmclient/provider/openai"
)

// Bodies that end with the vendor's end marker.
const (
	chatDone = `data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		"data: [DONE]\n\n"
	responsesDone = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r1\",\"model\":\"gpt-4o\"}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r1\",\"model\":\"gpt-4o\",\"status\":\"completed\"}}\n\n"
)

// endServer is a loopback server that streams a body ending with an end marker, then
// holds the response open until after's answer, and counts the connections it accepts.
type endServer struct {
	*httptest.Server
	conns atomic.Int64
}

// newEndServer starts an endServer: after the body is flushed, after(w, r) decides how the
// response ends (returning ends it). The test's cleanup ends every held response first.
func newEndServer(t *testing.T, body string, after func(w http.ResponseWriter, r *http.Request, testDone <-chan struct{})) *endServer {
	t.Helper()
	s := &endServer{}
	testDone := make(chan struct{})
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
		w.(http.Flusher).Flush() // chunked: the terminator comes when the handler returns
		after(w, r, testDone)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	t.Cleanup(func() { close(testDone) }) // runs first: held handlers return
	return s
}

// readToEnd reads ps to io.EOF.
func readToEnd(t *testing.T, recv func() error) {
	t.Helper()
	for range 100 {
		if err := recv(); err == io.EOF {
			return
		} else if err != nil {
			t.Fatalf("Recv: %v", err)
		}
	}
	t.Fatal("no end after 100 chunks")
}

// TestStreamCloseAfterEndReusesConnection reads streams to their end marker and closes
// them, one after another; the upstream sends the body's end (the chunked terminator) only
// once the reader has seen the end marker, as a real server's last packet may arrive. The
// connection must go back to the pool: one connection serves them all.
func TestStreamCloseAfterEndReusesConnection(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		opts []openai.Option
	}{
		{"chat completions", chatDone, nil},
		{"responses", responsesDone, []openai.Option{openai.WithResponsesAPI()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			srv := newEndServer(t, tc.body, func(_ http.ResponseWriter, r *http.Request, testDone <-chan struct{}) {
				select {
				case <-release:
				case <-r.Context().Done():
				case <-testDone:
				}
			})
			p, err := openai.New(append([]openai.Option{openai.WithBaseURL(srv.URL + "/v1"),
				openai.WithHTTPClient(srv.Client())}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			const n = 20
			for range n {
				ps, err := p.Stream(context.Background(), simpleCall("gpt-4o"))
				if err != nil {
					t.Fatal(err)
				}
				readToEnd(t, func() error { _, err := ps.Recv(); return err })
				release <- struct{}{} // the handler returns: the server writes the body's end
				if err := ps.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
			}
			// Sending the body's end races the drain's bound only on a badly overloaded
			// machine; without the drain every stream takes a new connection.
			if got := srv.conns.Load(); got > 3 {
				t.Fatalf("%d streams used %d connections; want 1 (at most 3)", n, got)
			} else {
				t.Logf("%d streams used %d connections", n, got)
			}
		})
	}
}

// TestStreamCloseAfterEndHostileUpstream checks that an upstream that sends the end marker
// and then holds the body open, trickles bytes or floods them, delays neither Recv nor Close
// by more than the drain's short bound (10 ms; checked against a generous 2 s here, on a
// real loopback connection), and leaves no goroutine behind (TestMain's goleak).
func TestStreamCloseAfterEndHostileUpstream(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after func(w http.ResponseWriter, r *http.Request, testDone <-chan struct{})
	}{
		{"stalls", func(_ http.ResponseWriter, r *http.Request, testDone <-chan struct{}) {
			select {
			case <-r.Context().Done():
			case <-testDone:
			}
		}},
		{"trickles", func(w http.ResponseWriter, r *http.Request, testDone <-chan struct{}) {
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-r.Context().Done():
					return
				case <-testDone:
					return
				case <-tick.C:
					if _, err := io.WriteString(w, ":\n"); err != nil {
						return
					}
					w.(http.Flusher).Flush()
				}
			}
		}},
		{"floods", func(w http.ResponseWriter, r *http.Request, testDone <-chan struct{}) {
			line := ": " + strings.Repeat("x", 1020) + "\n"
			for r.Context().Err() == nil {
				select {
				case <-testDone:
					return
				default:
				}
				if _, err := io.WriteString(w, line); err != nil {
					return
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newEndServer(t, chatDone, tc.after)
			p, err := openai.New(openai.WithBaseURL(srv.URL+"/v1"), openai.WithHTTPClient(srv.Client()))
			if err != nil {
				t.Fatal(err)
			}
			ps, err := p.Stream(context.Background(), simpleCall("gpt-4o"))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			readToEnd(t, func() error { _, err := ps.Recv(); return err })
			if err := ps.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("Recv to the end and Close took %v", d)
			}
			srv.CloseClientConnections()
		})
	}
}
