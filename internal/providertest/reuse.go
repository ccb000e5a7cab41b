package providertest

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
)

// Opener opens one stream on a Provider pointed at srv and using srv.Client(), whose
// Transport keeps idle connections.
type Opener func(t *testing.T, srv *httptest.Server) llmclient.ProviderStream

// endServer is a loopback server that streams a body, then ends each response as its
// after function decides (returning ends it), and counts the connections it accepts.
type endServer struct {
	*httptest.Server
	conns atomic.Int64
}

// after ends a response once the body was flushed; testDone is closed when the test ends.
type after func(w http.ResponseWriter, r *http.Request, testDone <-chan struct{})

func newEndServer(t *testing.T, body string, end after) *endServer {
	t.Helper()
	s := &endServer{}
	testDone := make(chan struct{})
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
		w.(http.Flusher).Flush() // chunked: the terminator comes when the handler returns
		end(w, r, testDone)
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

// recvToEnd reads st to io.EOF.
func recvToEnd(t *testing.T, st llmclient.ProviderStream) {
	t.Helper()
	for range 1000 {
		if _, err := st.Recv(); err == io.EOF {
			return
		} else if err != nil {
			t.Fatalf("Recv: %v", err)
		}
	}
	t.Fatal("no end after 1000 chunks")
}

// recvToError reads st up to its first error, which must be an *llmclient.Error: the
// in-band error event the body ends with.
func recvToError(t *testing.T, st llmclient.ProviderStream) {
	t.Helper()
	for range 1000 {
		_, err := st.Recv()
		if err == nil {
			continue
		}
		var le *llmclient.Error
		if !errors.As(err, &le) {
			t.Fatalf("Recv: %v; want the in-band error", err)
		}
		return
	}
	t.Fatal("no error after 1000 chunks")
}

// CheckEndKeepsConnection reads streams of body (which ends with the vendor's end marker)
// to their end and closes them, one after another. The upstream sends the body's own end
// (the chunked terminator) only once the reader has seen the end marker, as a real
// server's last packet may arrive after it. Each stream's connection must go back to the
// pool: one connection serves them all.
func CheckEndKeepsConnection(t *testing.T, body string, open Opener) {
	t.Helper()
	checkKeepsConnection(t, body, open, recvToEnd)
}

func checkKeepsConnection(t *testing.T, body string, open Opener, read func(*testing.T, llmclient.ProviderStream)) {
	t.Helper()
	release := make(chan struct{})
	srv := newEndServer(t, body, func(_ http.ResponseWriter, r *http.Request, testDone <-chan struct{}) {
		select {
		case <-release:
		case <-r.Context().Done():
		case <-testDone:
		}
	})
	const n = 20
	for range n {
		st := open(t, srv.Server)
		read(t, st)
		release <- struct{}{} // the handler returns: the server writes the body's end
		if err := st.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	// The body's end can miss the drain's bound only on a badly overloaded machine;
	// without the drain, every stream takes a new connection.
	if got := srv.conns.Load(); got > 3 {
		t.Fatalf("%d streams used %d connections; want 1 (at most 3)", n, got)
	} else {
		t.Logf("%d streams used %d connections", n, got)
	}
}

// CheckEndHostileUpstream checks that an upstream that sends body (ending with the
// vendor's end marker) and then holds the response open, trickles bytes or floods them,
// delays neither Recv nor Close by more than a short bound (checked against a generous 2
// s, on a real loopback connection). The package's TestMain (goleak) checks that nothing
// is left running.
func CheckEndHostileUpstream(t *testing.T, body string, open Opener) {
	t.Helper()
	checkHostileUpstream(t, body, open, recvToEnd)
}

// CheckErrorEventEnd is CheckEndKeepsConnection and CheckEndHostileUpstream for a body
// that ends with an in-band error event (after a 200): read up to that error and closed,
// the stream gives its connection back to the pool, and an upstream that holds the
// response open after the event does not hold up Close.
func CheckErrorEventEnd(t *testing.T, body string, open Opener) {
	t.Helper()
	checkKeepsConnection(t, body, open, recvToError)
	checkHostileUpstream(t, body, open, recvToError)
}

func checkHostileUpstream(t *testing.T, body string, open Opener, read func(*testing.T, llmclient.ProviderStream)) {
	t.Helper()
	for _, tc := range []struct {
		name string
		end  after
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
			srv := newEndServer(t, body, tc.end)
			st := open(t, srv.Server)
			start := time.Now()
			read(t, st)
			if err := st.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("Recv to the end and Close took %v", d)
			}
			srv.CloseClientConnections()
		})
	}
}

// CheckDecoderLeavesBody checks that a stream made by a Dialect's NewStream over body
// (which ends with the vendor's end marker) reads nothing more after the end, not even in
// Close: the Transport reads that body through a recorder whose Close does nothing, and
// owns the upstream body, so a read there could only block or race with its reader.
func CheckDecoderLeavesBody(t *testing.T, body string, newStream func(*http.Response) llmclient.ProviderStream) {
	t.Helper()
	b := &exhaustibleBody{t: t, r: strings.NewReader(body)}
	st := newStream(&http.Response{StatusCode: http.StatusOK,
		Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: b})
	recvToEnd(t, st)
	b.done = true
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// exhaustibleBody fails t on a read after done.
type exhaustibleBody struct {
	t    *testing.T
	r    io.Reader
	done bool
}

func (b *exhaustibleBody) Read(p []byte) (int, error) {
	if b.done {
		b.t.Error("the body was read after the stream's end")
		return 0, io.EOF
	}
	return b.r.Read(p)
}

func (*exhaustibleBody) Close() error { return nil }

// CheckBodyEndKeepsConnection reads streams of body, which the upstream ends right after
// sending it, to their end and closes them, one after another: for a stream that ends
// only with its body (no end marker), one connection must serve them all.
func CheckBodyEndKeepsConnection(t *testing.T, body string, open Opener) {
	t.Helper()
	srv := newEndServer(t, body, func(http.ResponseWriter, *http.Request, <-chan struct{}) {})
	const n = 20
	for range n {
		st := open(t, srv.Server)
		recvToEnd(t, st)
		if err := st.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	if got := srv.conns.Load(); got != 1 {
		t.Fatalf("%d streams used %d connections; want 1", n, got)
	}
}
