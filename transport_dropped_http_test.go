package llmclient_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
)

// silentSSE is a loopback upstream that sends a stream's first events and then stays
// silent until the client goes away or the test ends.
func silentSSE(t *testing.T) *httptest.Server {
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, roleChunk+chunk("Hel"))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(func() {
		close(done)
		srv.Close()
	})
	return srv
}

// dropStream sends a streaming request through rt, reads a little and drops the body
// without Close.
func dropStream(t *testing.T, rt http.RoundTripper, url string) {
	t.Helper()
	resp, err := post(t, context.Background(), rt, url, streamBody)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	_, err = resp.Body.Read(make([]byte, 16))
	require.NoError(t, err)
}

// A transport stream from a real HTTP upstream (loopback, net/http's own transport) that
// the caller drops without Close gives its concurrency slot back once it is unreachable,
// although net/http keeps the response reachable while the upstream is silent.
func TestTransportDroppedHTTPStreamGivesItsSlotBack(t *testing.T) {
	srv := silentSSE(t)
	c := newClient(t, oaiUpstream(t, "oai", srv.URL+"/v1"), llmclient.WithIdleTimeout(0))
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	dropStream(t, c.Transport(base), srv.URL+"/v1/chat/completions")
	require.Equal(t, 1, c.InFlight("oai"))
	for i := 0; i < 200 && c.InFlight("oai") != 0; i++ {
		runtime.GC()
		time.Sleep(time.Millisecond) // real I/O: the cleanup closes a real connection
	}
	assert.Equal(t, 0, c.InFlight("oai"), "a dropped body gives its slot back")
}

// A half-open probe stream the caller drops without Close does not keep the breaker
// half-open with its probe taken: once the body is unreachable the probe ends.
func TestTransportDroppedHTTPProbeFreesTheBreaker(t *testing.T) {
	srv := silentSSE(t)
	c := newClient(t, oaiUpstream(t, "oai", srv.URL+"/v1"), llmclient.WithIdleTimeout(0), llmclient.WithMaxAttempts(1),
		llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Millisecond}))
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	// The base fails the first round trip (a network error): the breaker opens.
	fail := true
	rt := c.Transport(rtFunc(func(r *http.Request) (*http.Response, error) {
		if fail {
			fail = false
			return nil, io.ErrUnexpectedEOF
		}
		return base.RoundTrip(r)
	}))
	_, _ = post(t, context.Background(), rt, srv.URL+"/v1/chat/completions", `{"model":"gpt-4o","messages":[]}`)
	require.Eventually(t, func() bool { return c.Breaker("oai").State() == breaker.HalfOpen }, time.Second, time.Millisecond)
	dropStream(t, rt, srv.URL+"/v1/chat/completions")
	require.Equal(t, 1, c.Breaker("oai").Snapshot().ProbesInFlight)
	for i := 0; i < 200 && c.Breaker("oai").Snapshot().ProbesInFlight != 0; i++ {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	assert.Zero(t, c.Breaker("oai").Snapshot().ProbesInFlight, "the abandoned probe ended")
}
