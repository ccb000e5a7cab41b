package llmclient_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"weak"

	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/fake"
)

// trackedStream is a provider stream whose memory the test follows.
type trackedStream struct {
	llmclient.ProviderStream
	ballast [64 << 10]byte
}

// trackingProvider hands out streams the test can see freed through weak pointers.
type trackingProvider struct {
	*fake.Provider
	last weak.Pointer[trackedStream]
}

func (p *trackingProvider) Stream(ctx context.Context, call *llmclient.Call) (llmclient.ProviderStream, error) {
	ps, err := p.Provider.Stream(ctx, call)
	if err != nil {
		return nil, err
	}
	ts := &trackedStream{ProviderStream: ps}
	p.last = weak.Make(ts)
	return ts, nil
}

// A closed stream the caller drops is freed by the next collection: nothing (a cleanup
// waiting for an object already released) keeps the attempt and its upstream stream for a
// second one. A gateway closing hundreds of streams a second would otherwise hold twice
// the memory it needs between collections.
func TestClosedStreamIsFreedByOneCollection(t *testing.T) {
	for _, tc := range []struct {
		name string
		read int // chunks read before Close; -1: to the end
	}{{"read to the end", -1}, {"closed midway", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			p := &trackingProvider{Provider: fake.New(fake.Stream("a", "b", "c").Forever())}
			c := newClient(t, up("a", p))
			func() {
				s, err := c.Stream(context.Background(), chatReq("m"))
				require.NoError(t, err)
				for n := 0; tc.read < 0 || n < tc.read; n++ {
					if !s.Next() {
						break
					}
				}
				require.NoError(t, s.Err())
				require.NoError(t, s.Close())
			}()
			require.NotNil(t, p.last.Value(), "the stream is held until collected")
			runtime.GC()
			require.Nil(t, p.last.Value(), "one collection frees a closed stream's attempt")
		})
	}
}

// trackedBody is an upstream response body whose memory the test follows.
type trackedBody struct {
	io.ReadCloser
	ballast [64 << 10]byte
}

// trackingTransport hands out bodies the test can see freed through weak pointers.
type trackingTransport struct {
	next http.RoundTripper
	last weak.Pointer[trackedBody]
}

func (tt *trackingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := tt.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b := &trackedBody{ReadCloser: resp.Body}
	tt.last = weak.Make(b)
	resp.Body = b
	return resp, nil
}

// The same for the Transport: a response body closed and dropped is freed, with the
// upstream body under it, by one collection.
func TestClosedTransportBodyIsFreedByOneCollection(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"stream", streamBody},
		{"one-shot", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeOpenAI(t)
			tt := &trackingTransport{next: http.DefaultTransport}
			c := newClient(t, oaiUpstream(t, "oai", srv+"/v1"))
			rt := c.Transport(tt)
			func() {
				resp, err := post(t, context.Background(), rt, srv+"/v1/chat/completions", tc.body)
				require.NoError(t, err)
				got, err := readBody(t, resp)
				require.NoError(t, err)
				require.True(t, strings.Contains(got, "hello"), got)
			}()
			require.NotNil(t, tt.last.Value(), "the body is held until collected")
			runtime.GC()
			require.Nil(t, tt.last.Value(), "one collection frees a closed body")
		})
	}
}

// fakeOpenAI is a loopback Chat Completions upstream answering "hello", one-shot or as an
// event stream as asked.
func fakeOpenAI(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, roleChunk+chunk("hello")+stopChunk+done)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, strings.Replace(chatOK, `"hi"`, `"hello"`, 1))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
