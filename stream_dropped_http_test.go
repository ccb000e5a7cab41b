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
)

// A stream from a real HTTP upstream (loopback) that the caller drops without Close gives
// its slot back once it is unreachable, although net/http's goroutines hold the request's
// context while the upstream is silent.
func TestDroppedHTTPStreamGivesItsSlotBack(t *testing.T) {
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
	defer srv.Close()
	defer close(done)
	c := newClient(t, oaiUpstream(t, "oai", srv.URL+"/v1"), llmclient.WithIdleTimeout(0))
	func() {
		s, err := c.Stream(context.Background(), chatReq("gpt-4o"))
		require.NoError(t, err)
		require.True(t, s.Next())
	}()
	require.Equal(t, 1, c.InFlight("oai"))
	for i := 0; i < 200 && c.InFlight("oai") != 0; i++ {
		runtime.GC()
		time.Sleep(5 * time.Millisecond) // let the cleanup run
	}
	assert.Equal(t, 0, c.InFlight("oai"), "a dropped stream gives its slot back")
}
