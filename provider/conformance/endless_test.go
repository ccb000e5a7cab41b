package conformance_test

import (
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/sse"
)

// endless repeats unit forever: an upstream that never ends its line or its event.
type endless struct {
	unit []byte
	off  int
}

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = e.unit[e.off]
		e.off = (e.off + 1) % len(e.unit)
	}
	return len(p), nil
}

// endlessTransport answers every request with 200 and an endless event-stream body.
type endlessTransport struct{ unit string }

func (e endlessTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(&endless{unit: []byte(e.unit)}), Request: r}, nil
}

// TestEndlessStreamIsBounded checks that every dialect stops reading an upstream that
// sends one line without end, or one event whose data lines never end, at the event size
// limit, and fails the stream as a server_error (retried, failed over) wrapping
// sse.ErrEventTooLarge: memory stays bounded whatever the upstream sends.
func TestEndlessStreamIsBounded(t *testing.T) {
	for kind, unit := range map[string]string{"line": "data: xxxxxxxxxxxxxxxx", "event": "data: {\"x\":1}\n"} {
		for name, mk := range keyedProviders("sk-test-endless-0123456789") {
			t.Run(kind+"/"+name, func(t *testing.T) {
				st := openKeyedStream(t, mk, endlessTransport{unit})
				var err error
				for range 1000 {
					if _, err = st.Recv(); err != nil {
						break
					}
				}
				if !errors.Is(err, sse.ErrEventTooLarge) || llmclient.ClassOf(err) != failure.ServerError {
					t.Errorf("unit %q: err = %v (class %v), want a server_error wrapping sse.ErrEventTooLarge", unit, err, llmclient.ClassOf(err))
				}
			})
		}
	}
}
