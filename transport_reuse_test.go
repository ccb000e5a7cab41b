package llmclient_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient"
)

// reuseServer streams an event stream ending in [DONE], then ends the response as end
// decides, and counts the connections it accepts.
func reuseServer(t *testing.T, end func(w http.ResponseWriter, r *http.Request, testDone <-chan struct{})) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	return reuseServerOf(t, roleChunk+chunk("hello")+stopChunk+done, end)
}

// reuseServerOf is reuseServer streaming body.
func reuseServerOf(t *testing.T, body string, end func(w http.ResponseWriter, r *http.Request, testDone <-chan struct{})) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	testDone := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
		w.(http.Flusher).Flush() // chunked: the terminator comes when the handler returns
		end(w, r, testDone)
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(testDone) }) // runs first: held handlers return
	return srv, &conns
}

// readToDone reads a response body until it has delivered [DONE], as an SDK does, and
// stops there.
func readToDone(t *testing.T, body io.Reader) {
	t.Helper()
	readTo(t, body, "[DONE]")
}

// readTo reads a response body until it has delivered marker, and stops there.
func readTo(t *testing.T, body io.Reader, marker string) {
	t.Helper()
	var got strings.Builder
	buf := make([]byte, 4<<10)
	for !strings.Contains(got.String(), marker) {
		n, err := body.Read(buf)
		got.Write(buf[:n])
		require.NoError(t, err, "read before %s: %q", marker, got.String())
	}
}

// A caller that stops reading at [DONE] and closes the body, as the SDKs do, leaves the
// upstream connection reusable: the Transport reads the body's own end (the chunked
// terminator, which may arrive after the marker) before it ends the attempt.
func TestTransportStreamClosedAtDoneKeepsConnection(t *testing.T) {
	for _, cont := range []bool{true, false} {
		t.Run(fmt.Sprintf("continuation=%v", cont), func(t *testing.T) {
			testStreamClosedAtDoneKeepsConnection(t, llmclient.WithStreamContinuation(cont))
		})
	}
}

func testStreamClosedAtDoneKeepsConnection(t *testing.T, opt llmclient.Option) {
	release := make(chan struct{})
	srv, conns := reuseServer(t, func(_ http.ResponseWriter, r *http.Request, testDone <-chan struct{}) {
		select {
		case <-release:
		case <-r.Context().Done():
		case <-testDone:
		}
	})
	c := newClient(t, oaiUpstream(t, "oai", srv.URL+"/v1"), opt)
	rt := c.Transport(srv.Client().Transport)
	const n = 20
	for range n {
		resp, err := post(t, context.Background(), rt, srv.URL+"/v1/chat/completions", streamBody)
		require.NoError(t, err)
		readToDone(t, resp.Body)
		release <- struct{}{} // the handler returns: the server writes the body's end
		require.NoError(t, resp.Body.Close())
	}
	// Without the read to the body's end every stream takes a new connection; the end
	// can miss the read's bound only on a badly overloaded machine.
	assert.LessOrEqual(t, conns.Load(), int64(3), "%d streams, %d connections", n, conns.Load())
	assert.Equal(t, 0, c.InFlight("oai"))
}

// An upstream that holds its response open after [DONE] delays the caller's Close by no
// more than the read's short bound, and the stream still ends as a success.
func TestTransportStreamClosedAtDoneHostileUpstream(t *testing.T) {
	srv, _ := reuseServer(t, func(_ http.ResponseWriter, r *http.Request, testDone <-chan struct{}) {
		select {
		case <-r.Context().Done():
		case <-testDone:
		}
	})
	var log eventLog
	c := newClient(t, oaiUpstream(t, "oai", srv.URL+"/v1"), llmclient.WithObserver(log.observe))
	rt := c.Transport(srv.Client().Transport)
	resp, err := post(t, context.Background(), rt, srv.URL+"/v1/chat/completions", streamBody)
	require.NoError(t, err)
	readToDone(t, resp.Body)
	start := time.Now()
	require.NoError(t, resp.Body.Close())
	assert.Less(t, time.Since(start), 2*time.Second, "Close waits only for the bounded read")
	assert.Equal(t, 0, c.InFlight("oai"))
	assert.Equal(t, 0, c.Breaker("oai").Snapshot().Failures, "the stream ended at its marker: a success")
	srv.CloseClientConnections()
}

// A caller that reads a stream up to its in-band error event and closes the body, as
// the SDKs do, leaves the upstream connection reusable too, and an upstream that holds
// the response open after the event delays Close by no more than the bounded read.
func TestTransportStreamClosedAtErrorEventKeepsConnection(t *testing.T) {
	const failed = `data: {"error":{"message":"The server had an error","type":"server_error"}}` + "\n\n"
	release := make(chan struct{})
	srv, conns := reuseServerOf(t, roleChunk+chunk("hel")+failed, func(_ http.ResponseWriter, r *http.Request, testDone <-chan struct{}) {
		select {
		case <-release:
		case <-r.Context().Done():
		case <-testDone:
		}
	})
	c := newClient(t, oaiUpstream(t, "oai", srv.URL+"/v1"), llmclient.WithStreamContinuation(false))
	rt := c.Transport(srv.Client().Transport)
	const n = 20
	for range n {
		resp, err := post(t, context.Background(), rt, srv.URL+"/v1/chat/completions", streamBody)
		require.NoError(t, err)
		readTo(t, resp.Body, "server_error")
		release <- struct{}{} // the handler returns: the server writes the body's end
		require.NoError(t, resp.Body.Close())
	}
	assert.LessOrEqual(t, conns.Load(), int64(3), "%d streams, %d connections", n, conns.Load())
	assert.Equal(t, 0, c.InFlight("oai"))

	// Held open after the event: Close does not wait for the server.
	resp, err := post(t, context.Background(), rt, srv.URL+"/v1/chat/completions", streamBody)
	require.NoError(t, err)
	readTo(t, resp.Body, "server_error")
	start := time.Now()
	require.NoError(t, resp.Body.Close())
	assert.Less(t, time.Since(start), 2*time.Second, "Close waits only for the bounded read")
	assert.Equal(t, 0, c.InFlight("oai"))
	srv.CloseClientConnections()
}
