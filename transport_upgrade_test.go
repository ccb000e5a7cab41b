package llmclient_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// upgradeConn is the body of a 101 response: the upgraded connection, which a WebSocket
// client both reads and writes. It never ends by itself; the request's context closes it.
type upgradeConn struct {
	*io.PipeReader
	w *io.PipeWriter
}

func (c upgradeConn) Write(p []byte) (int, error) { return len(p), nil }

func (c upgradeConn) Close() error { _ = c.w.Close(); return c.PipeReader.Close() }

// A 101 Switching Protocols answer (a WebSocket upgrade, as for OpenAI's realtime API)
// is the connection itself: the transport hands it over untouched, at once, instead of
// reading it whole as a one-shot body (which waited on the connection until the attempt
// timeout, and then retried).
func TestTransportSwitchingProtocolsIsHandedOverUntouched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls int
		base := rtFunc(func(req *http.Request) (*http.Response, error) {
			calls++
			pr, pw := io.Pipe()
			conn := upgradeConn{pr, pw}
			context.AfterFunc(req.Context(), func() { _ = conn.Close() })
			return &http.Response{StatusCode: http.StatusSwitchingProtocols, Status: "101 Switching Protocols",
				Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: req,
				Header: http.Header{"Upgrade": {"websocket"}, "Connection": {"Upgrade"}}, Body: conn}, nil
		})
		c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"))
		req, err := http.NewRequest(http.MethodGet, "http://oai.test/v1/realtime?model=gpt-realtime", nil)
		require.NoError(t, err)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		start := time.Now()
		resp, err := c.Transport(base).RoundTrip(req)
		require.NoError(t, err)
		assert.Zero(t, time.Since(start), "answered at once")
		assert.Equal(t, 1, calls)
		assert.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
		_, rw := resp.Body.(io.ReadWriteCloser)
		assert.True(t, rw, "the body is the upgraded connection, writable")
		assert.Equal(t, 0, c.InFlight("oai"), "the attempt is settled: the connection is the caller's")
		require.NoError(t, resp.Body.Close())
	})
}
