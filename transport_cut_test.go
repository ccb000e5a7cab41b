package llmclient_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A body handed over while the upstream still sends it (a one-shot body larger than the
// replay limit, or an event stream the Dialect does not decode) that the caller's context
// ends in the middle of: the next Read fails with the cancellation, never a clean io.EOF
// that would pass a cut body off as whole. (The attempt was settled as canceled first, and
// the read failure that followed was taken for what comes after a vendor's end marker.)
func TestTransportLiveBodyCanceledMidBodyIsNoCleanEOF(t *testing.T) {
	half := `{"object":"list","data":[` + strings.Repeat(`{"embedding":[0.1,0.2]},`, 100)
	tests := []struct {
		name, path, body string
		step             func(http.ResponseWriter, *http.Request)
	}{
		{"one-shot body over the replay limit", "/v1/embeddings", `{"model":"text-embedding-3-small","input":"hi"}`,
			func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, half)
				<-r.Context().Done()
			}},
		{"guarded stream", "/v1/chat/completions", streamBody, sseStep(ev{0, roleChunk}, ev{0, chunk("Hel")}, ev{-1, ""})},
		{"event stream passed through", "/v1/models", "",
			func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, "data: {\"a\":1}\n\n")
				<-r.Context().Done()
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var log eventLog
				c := newClient(t, oaiUpstream(t, "oai", "http://oai.test/v1"), llmclient.WithObserver(log.observe))
				ct := &countingTransport{base: memTransport{newScript(tt.step)}}
				ctx, cancel := context.WithCancel(context.Background())
				resp, err := post(t, ctx, c.Transport(ct, llmclient.WithMaxReplayBody(1024)), "http://oai.test"+tt.path, tt.body)
				require.NoError(t, err)
				buf := make([]byte, 64<<10)
				n, err := resp.Body.Read(buf)
				require.NoError(t, err)
				require.NotZero(t, n)
				synctest.Wait() // the upstream sent what it had: nothing more is to come
				cancel()
				synctest.Wait()
				var rest []byte
				for err == nil {
					n, err = resp.Body.Read(buf)
					rest = append(rest, buf[:n]...)
				}
				assert.NotErrorIs(t, err, io.EOF, "a cut body never ends cleanly")
				assert.Equal(t, failure.Canceled, llmclient.ClassOf(err), "%v", err)
				require.NoError(t, resp.Body.Close())
				synctest.Wait()
				assert.Equal(t, 0, c.InFlight("oai"))
				assert.Equal(t, ct.opened.Load(), ct.closed.Load())
				at := log.kinds(event.Attempt)
				require.Len(t, at, 1)
				assert.Equal(t, failure.Canceled, at[0].Class)
			})
		})
	}
}
