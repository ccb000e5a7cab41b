package llmgateway_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// soloOpenAIConfig is one OpenAI upstream "oa", tenant a, the access log on.
func soloOpenAIConfig(oa *vendor, extra string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
log: {level: info}
retry: {backoff_initial: 1ms, backoff_max: 2ms, max_attempts: 1}
upstreams:
  - name: oa
    vendor: openai
    base_url: %s/v1
    keys_env: [UP_KEY]
tenants:
  - name: a
    keys_env: [TENANT_A]
    models: ["*"]
%s`, oa.URL, extra)
}

// endlessStream makes oa stream chunks every 20 ms until its caller goes away, which it
// reports on the channel returned.
func endlessStream(oa *vendor) <-chan time.Time {
	gone := make(chan time.Time, 1)
	oa.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		w.Header().Set("content-type", "text/event-stream")
		for i := 0; i < 1000; i++ {
			fmt.Fprintf(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"tok%d "},"finish_reason":null}]}`+"\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				gone <- time.Now()
				return true
			case <-time.After(20 * time.Millisecond):
			}
		}
		return true
	})
	return gone
}

// checkHangupLine checks the one access log line of a stream its caller left mid-way: it
// names the upstream that served it, and has the cost and the tokens (the Client's
// estimate, the upstream having reported none).
func checkHangupLine(t *testing.T, logs string) {
	t.Helper()
	if c := strings.Count(logs, `"msg":"request"`); c != 1 {
		t.Fatalf("%d access log lines:\n%s", c, logs)
	}
	for _, want := range []string{`"class":"canceled"`, `"upstream":"oa"`, `"attempts":1`, `"cost_usd"`, `"input_tokens"`, `"output_tokens"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the line of a stream the caller left mid-way has no %s:\n%s", want, logs)
		}
	}
}

// A caller that reads a few chunks of a stream and hangs up: the upstream is closed at
// once, and the request has one access log line with what is known of the call.
func TestMidStreamHangupLogLine(t *testing.T) {
	oa := newVendor(t, "openai")
	upstreamGone := endlessStream(oa)
	g := startGateway(t, soloOpenAIConfig(oa, "budgets:\n  - {name: daily, scope: client, cap_usd: 10}"))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", g.api.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer gw-key-a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for n := 0; n < 4; {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: ") {
			n++
		}
	}
	cancel()
	resp.Body.Close()
	select {
	case <-upstreamGone:
	case <-time.After(2 * time.Second):
		t.Fatal("the upstream stream was not closed within 2 s of the caller hanging up")
	}
	var logs string
	for i := 0; i < 300 && !strings.Contains(logs, `"msg":"request"`); i++ {
		time.Sleep(10 * time.Millisecond)
		logs = g.logs.String()
	}
	checkHangupLine(t, logs)
}

// failingWriter is a caller whose connection breaks after a few writes, while the
// request's context is still live: the gateway learns of the hang-up from a failed write.
type failingWriter struct {
	mu     sync.Mutex
	h      http.Header
	writes int
}

var errBrokenPipe = errors.New("broken pipe")

func (w *failingWriter) Header() http.Header { return w.h }
func (w *failingWriter) WriteHeader(int)     {}
func (w *failingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	if w.writes > 3 {
		return 0, errBrokenPipe
	}
	return len(p), nil
}
func (w *failingWriter) FlushError() error { return nil }

// A write to the caller fails mid-stream: the upstream is closed at once, and the access
// log line still names the upstream and has the call's tokens and cost.
func TestStreamWriteFailureLogLine(t *testing.T) {
	oa := newVendor(t, "openai")
	upstreamGone := endlessStream(oa)
	g := startGateway(t, soloOpenAIConfig(oa, "budgets:\n  - {name: daily, scope: client, cap_usd: 10}"))
	req := httptest.NewRequest("POST", "/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer gw-key-a")
	w := &failingWriter{h: http.Header{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Handler().ServeHTTP(w, req)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler did not return after the write failed")
	}
	select {
	case <-upstreamGone:
	case <-time.After(2 * time.Second):
		t.Fatal("the upstream stream was not closed within 2 s of the failed write")
	}
	checkHangupLine(t, g.logs.String())
}
