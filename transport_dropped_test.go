package llmclient_test

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A one-shot body over the replay limit, handed over while still read, that the caller
// drops without reading it to the end or closing it: its slot comes back and its upstream
// body is closed once the body is unreachable, as for a dropped stream.
func TestTransportDroppedLargeBodyGivesItsSlotBack(t *testing.T) {
	half := `{"object":"list","data":[` + strings.Repeat(`{"embedding":[0.1,0.2]},`, 100)
	up := newScript(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, half)
		<-r.Context().Done()
	})
	var log eventLog
	c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithObserver(log.observe))
	ct := &countingTransport{base: memTransport{up}}
	func() {
		resp, err := post(t, context.Background(), c.Transport(ct, llmclient.WithMaxReplayBody(1024)),
			"http://oai.test/v1/embeddings", `{"model":"text-embedding-3-small","input":"hi"}`)
		require.NoError(t, err)
		_, err = resp.Body.Read(make([]byte, 16))
		require.NoError(t, err)
	}()
	require.Equal(t, 1, c.InFlight("oai"))
	for i := 0; i < 1000 && (c.InFlight("oai") != 0 || ct.closed.Load() != ct.opened.Load()); i++ {
		runtime.GC()
		runtime.Gosched() // let the cleanup run
	}
	assert.Equal(t, 0, c.InFlight("oai"), "a dropped body gives its slot back")
	assert.Equal(t, ct.opened.Load(), ct.closed.Load(), "and its upstream body is closed")
	attempts := log.kinds(llmclient.EventAttempt)
	require.Len(t, attempts, 1)
	assert.Equal(t, llmclient.ClassCanceled, attempts[0].Class)
}
