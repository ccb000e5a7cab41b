package llmgateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient/llmgateway"
)

// A client that has a one-shot answer finds the request in the access log and in the
// metrics, and the answer carries its length. Repeated: the line and the count are
// written before the answer is sent, not at some later moment.
func TestOneShotAnswerComesAfterItsLogLineAndCount(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, ""))
	const n = 50
	for i := range n {
		resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","messages":[{"role":"user","content":"Say hello."}]}`)
		if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(body)) {
			t.Fatalf("status %d, length %d for %d bytes", resp.StatusCode, resp.ContentLength, len(body))
		}
		if got := strings.Count(g.logs.String(), `"msg":"request"`); got != i+1 {
			t.Fatalf("after answer %d: %d access log lines", i+1, got)
		}
	}
	_, metrics := admin(t, g, "GET", "/metrics", "")
	if !strings.Contains(metrics, `llmgateway_requests_total{`) || !strings.Contains(metrics, "} "+strconv.Itoa(n)) {
		t.Fatalf("metrics do not count the %d requests:\n%.2000s", n, metrics)
	}
}

// The same for an answer larger than net/http's write buffer, which reaches the client
// as it is written.
func TestLargeOneShotAnswerComesAfterItsLogLine(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	text := strings.Repeat("word ", 16<<10)
	oa.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		w.Header().Set("content-type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"`+
			text+`"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":16384,"total_tokens":16389}}`)
		return true
	})
	cfg, err := llmgateway.Parse([]byte(baseConfig(oa, an, "")), env(baseEnv...))
	if err != nil {
		t.Fatal(err)
	}
	// A log destination that takes its time: the answer must wait for it.
	logs := &syncBuffer{}
	slow := slog.NewJSONHandler(logs, nil)
	g, err := llmgateway.New(cfg, llmgateway.WithLogger(slog.New(slowHandler{slow})))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	defer func() { srv.Close(); _ = g.Shutdown(context.Background()) }()
	for i := range 5 {
		resp, body := post(t, srv.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","messages":[{"role":"user","content":"Say hello."}]}`)
		if resp.StatusCode != http.StatusOK || len(body) < len(text) {
			t.Fatalf("status %d, %d bytes", resp.StatusCode, len(body))
		}
		if got := strings.Count(logs.String(), `"msg":"request"`); got != i+1 {
			t.Fatalf("after answer %d: %d access log lines", i+1, got)
		}
	}
}

// slowHandler takes 50 ms over each access log line.
type slowHandler struct{ slog.Handler }

func (h slowHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "request" {
		time.Sleep(50 * time.Millisecond)
	}
	return h.Handler.Handle(ctx, r)
}

// A one-shot answer is logged and counted before it is written, so a caller that never
// reads a large one is logged with status 200. Its failed writing is recorded after: a
// line "answer not delivered" with the request's id, and the route's count of
// undelivered answers.
func TestUnreadOneShotAnswerIsRecordedUndelivered(t *testing.T) {
	oa := newVendor(t, "openai")
	text := strings.Repeat("word ", 4<<20) // 20 MB, more than the sockets hold
	oa.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		w.Header().Set("content-type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"`+
			text+`"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`)
		return true
	})
	g := startGateway(t, oneUpstreamConfig(oa, "timeouts: {idle: 200ms}\nadmin: {listen: 127.0.0.1:0, token_env: ADMIN_TOKEN}\n"))
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	rawRequest(t, g.api.URL, 4096, "/v1/chat/completions", fmt.Sprintf("Content-Length: %d\r\nx-request-id: unread-1\r\n", len(body)), body)
	// 20 MB through the gateway under -race on a loaded machine takes a while: the bounds
	// are generous, the waits end as soon as the lines are there.
	logLine(t, g.logs, time.Minute, `"request_id":"unread-1"`, `"status":200`)
	for end := time.Now().Add(time.Minute); !strings.Contains(g.logs.String(), `"msg":"answer not delivered","request_id":"unread-1","route":"openai.chat"`); {
		if time.Now().After(end) {
			t.Fatalf("no line for the undelivered answer; log:\n%.3000s", g.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, metrics := admin(t, g, "GET", "/metrics", "")
	if !strings.Contains(metrics, `llmgateway_answers_undelivered_total{`) || !strings.Contains(metrics, `route="openai.chat"} 1`) {
		t.Fatalf("the undelivered answer is not counted:\n%.3000s", metrics)
	}
	if strings.Contains(g.logs.String(), "word word") {
		t.Fatal("the answer's text is in the log")
	}
}
