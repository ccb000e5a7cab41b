package llmgateway_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmclient/llmclient/llmgateway"
)

// heldWriter blocks every write until release is closed.
type heldWriter struct {
	release chan struct{}
	once    sync.Once
	writing chan struct{}
}

func (w *heldWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.writing) })
	<-w.release
	return len(p), nil
}

// A one-shot answer reaches the client whole before the access log line is written:
// a slow log destination does not delay it.
func TestOneShotAnswerIsSentBeforeTheAccessLog(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	cfg, err := llmgateway.Parse([]byte(baseConfig(oa, an, "")), env(baseEnv...))
	if err != nil {
		t.Fatal(err)
	}
	lw := &heldWriter{release: make(chan struct{}), writing: make(chan struct{})}
	g, err := llmgateway.New(cfg, llmgateway.WithLogger(slog.New(slog.NewJSONHandler(lw, nil))))
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(g.Handler())
	defer api.Close()
	released := false
	release := func() {
		if !released {
			released = true
			close(lw.release)
		}
	}
	defer release()

	got := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("POST", api.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"Say hello."}]}`))
		req.Header.Set("Authorization", "Bearer gw-key-a")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 || resp.ContentLength != int64(len(b)) {
			got <- "bad answer"
			return
		}
		got <- string(b)
	}()
	select {
	case b := <-got:
		if !strings.Contains(b, `"choices"`) {
			t.Fatalf("answer: %s", b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the answer waited for the access log")
	}
	select {
	case <-lw.writing:
	case <-time.After(10 * time.Second):
		t.Fatal("no access log line was written")
	}
	release()
	_ = g.Shutdown(t.Context())
}
