package llmclient_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
)

// staticStream answers every request with body, a whole event stream, from memory.
type staticStream struct{ body string }

func (s staticStream) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(strings.NewReader(s.body)), ContentLength: -1, Request: req}, nil
}

// BenchmarkTransportUncutStream reads a whole, uncut OpenAI chat stream of 200 text
// deltas through a Transport, with continuation on (the default: what the body delivers
// is kept in case it is cut) and off.
func BenchmarkTransportUncutStream(b *testing.B) {
	var sb strings.Builder
	for _, e := range oaiStream("s1", 100, 7, 200, strings.Split(strings.Repeat("word ", 200), " ")[:200]...) {
		sb.WriteString(e.data)
	}
	body := sb.String()
	for _, bc := range []struct {
		name string
		on   bool
	}{{"continuation", true}, {"no continuation", false}} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := llmclient.New(oaiUpstream(b, "a", "http://a.test/v1"), llmclient.WithStreamContinuation(bc.on))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			rt := c.Transport(staticStream{body})
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, "http://a.test/v1/chat/completions", strings.NewReader(streamBody))
				resp, err := rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				if err != nil || n != int64(len(body)) {
					b.Fatalf("read %d of %d bytes: %v", n, len(body), err)
				}
				_ = resp.Body.Close()
			}
		})
	}
}
