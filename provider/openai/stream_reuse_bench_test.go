package openai_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/llmclient/llmclient/provider/openai"
)

// BenchmarkStreamEndReuse streams a short Chat Completions answer over loopback from an
// upstream that flushes each event and [DONE], then ends the response at once, and reads
// each stream to its end and closes it, as the Client does. dials/op is the share of
// streams that needed a new connection (0 when every connection is reused).
func BenchmarkStreamEndReuse(b *testing.B) {
	events := []string{
		`{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello!"},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":" How can I help?"},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":9,"total_tokens":21}}`,
		`[DONE]`,
	}
	var dials atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			_, _ = io.WriteString(w, "data: "+e+"\n\n")
			w.(http.Flusher).Flush()
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	defer tr.CloseIdleConnections()
	p, err := openai.New(openai.WithBaseURL(srv.URL+"/v1"), openai.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		b.Fatal(err)
	}
	one := func() {
		st, err := p.Stream(context.Background(), simpleCall("m"))
		if err != nil {
			b.Error(err)
			return
		}
		for {
			if _, err := st.Recv(); err == io.EOF {
				break
			} else if err != nil {
				b.Error(err)
				break
			}
		}
		_ = st.Close()
	}
	run := func(b *testing.B, parallel bool) {
		dials.Store(0)
		b.ReportAllocs()
		if parallel {
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					one()
				}
			})
		} else {
			for b.Loop() {
				one()
			}
		}
		b.ReportMetric(float64(dials.Load())/float64(b.N), "dials/op")
	}
	b.Run("sequential", func(b *testing.B) { run(b, false) })
	b.Run("parallel", func(b *testing.B) { run(b, true) })
}
