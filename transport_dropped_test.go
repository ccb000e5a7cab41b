package llmclient_test

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A live body the caller reads a little of and drops without Close — a committed stream,
// or a one-shot body over the replay limit handed over while still read — gives its
// attempt back once it is unreachable: its slot comes back, its upstream body is closed
// and the attempt ends canceled.
func TestTransportDroppedBodyGivesItsSlotBack(t *testing.T) {
	half := `{"object":"list","data":[` + strings.Repeat(`{"embedding":[0.1,0.2]},`, 100)
	tests := []struct {
		name, path, body string
		step             func(http.ResponseWriter, *http.Request)
		opts             []llmclient.TransportOption
	}{
		{"stream", "/chat/completions", streamBody,
			sseStep(ev{0, roleChunk}, ev{0, chunk("Hel")}, ev{-1, ""}), nil},
		{"large one-shot body", "/embeddings", `{"model":"text-embedding-3-small","input":"hi"}`,
			func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, half)
				<-r.Context().Done()
			}, []llmclient.TransportOption{llmclient.WithMaxReplayBody(1024)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := newScript(tt.step)
			var log eventLog
			c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithIdleTimeout(0),
				llmclient.WithObserver(log.observe))
			ct := &countingTransport{base: memTransport{up}}
			func() {
				resp, err := post(t, context.Background(), c.Transport(ct, tt.opts...), "http://oai.test/v1"+tt.path, tt.body)
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
			attempts := log.kinds(event.Attempt)
			require.Len(t, attempts, 1)
			assert.Equal(t, failure.Canceled, attempts[0].Class)
		})
	}
}
