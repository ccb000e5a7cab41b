package llmgateway_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient/llmgateway"
)

// oneUpstreamConfig is one openai upstream "oa" with a single concurrency slot (taken
// at once, no waiting) and tenant a; extra is appended.
func oneUpstreamConfig(oa *vendor, extra string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
log: {level: info}
retry: {backoff_initial: 1ms, backoff_max: 2ms, max_attempts: 1}
limiter: {mode: fail_fast}
upstreams:
  - name: oa
    vendor: openai
    base_url: %s/v1
    keys_env: [UP_KEY]
    limits: {max_concurrent: 1}
tenants:
  - name: a
    keys_env: [TENANT_A]
    models: ["*"]
%s`, oa.URL, extra)
}

// floodStream makes the upstream's first call a stream that sends large chunks until
// its caller goes away; later calls get the default answers.
func floodStream(oa *vendor) {
	big := strings.Repeat("x", 8000)
	oa.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		if n > 0 {
			return false
		}
		w.Header().Set("content-type", "text/event-stream")
		for r.Context().Err() == nil {
			_, err := fmt.Fprintf(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":null}]}`+"\n\n", big)
			if err != nil {
				break
			}
			w.(http.Flusher).Flush()
		}
		return true
	})
}

// rawRequest opens a connection to addr (host:port or an http:// URL), with a receive
// buffer of rcvbuf bytes unless 0, and sends a request with tenant a's key, headers
// and body as given.
func rawRequest(t *testing.T, addr string, rcvbuf int, path, head, body string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(addr, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if rcvbuf > 0 {
		_ = c.(*net.TCPConn).SetReadBuffer(rcvbuf)
	}
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer gw-key-a\r\nContent-Type: application/json\r\n%s\r\n%s", path, head, body)
	return c
}

// logLine waits for the access log line whose text has every one of want, and returns
// it; it fails the test when none has come within limit (a safety net, not a measure).
func logLine(t *testing.T, logs *syncBuffer, limit time.Duration, want ...string) string {
	t.Helper()
	for end := time.Now().Add(limit); ; {
		for line := range strings.SplitSeq(logs.String(), "\n") {
			ok := strings.Contains(line, `"msg":"request"`)
			for _, w := range want {
				ok = ok && strings.Contains(line, w)
			}
			if ok {
				return line
			}
		}
		if time.Now().After(end) {
			t.Fatalf("no access log line with %q within %v; log:\n%s", want, limit, logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A keyed caller that sends its headers and then stalls its body is answered 408 at
// its request deadline, instead of holding the handler until it goes away.
func TestStalledRequestBodyIsAnsweredAtTheRequestDeadline(t *testing.T) {
	oa := newVendor(t, "openai")
	g := startGateway(t, oneUpstreamConfig(oa, "timeouts: {request: 200ms}"))
	c := rawRequest(t, g.api.URL, 4096, "/v1/chat/completions", "Content-Length: 1000\r\n", `{"model":`)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a safety net only
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 408 ") {
		t.Fatalf("a caller whose body stalled got %q, %v; want a 408", line, err)
	}
	if rest, err := io.ReadAll(br); err != nil {
		t.Fatalf("the connection stays open after the 408: %v; read %q", err, rest)
	}
	// A body that did not arrive in time is a timeout, not a malformed request.
	logLine(t, g.logs, 5*time.Second, `"status":408`, `"class":"timeout"`)
	if oa.count() != 0 {
		t.Errorf("the upstream was called %d times", oa.count())
	}
}

// A caller refused before its body is read (here: an unknown key) that stalls its body
// is answered too: net/http reads what is left of a body before it answers, and that
// read has the body's deadline.
func TestRefusedCallerWithStalledBodyIsAnswered(t *testing.T) {
	oa := newVendor(t, "openai")
	g := startGateway(t, oneUpstreamConfig(oa, "timeouts: {request: 200ms}"))
	c, err := net.Dial("tcp", strings.TrimPrefix(g.api.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer not-a-key\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a safety net only
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 401 ") {
		t.Fatalf("an unknown caller whose body stalled got %q, %v; want a 401", line, err)
	}
}

// A caller that opens a stream and never reads it is cut at its request deadline: the
// handler ends, its access log line names the upstream that served the stream, and
// the upstream's only concurrency slot is back for the next caller.
func TestUnreadStreamIsCutAtTheRequestDeadline(t *testing.T) {
	oa := newVendor(t, "openai")
	floodStream(oa)
	g := startGateway(t, oneUpstreamConfig(oa, "timeouts: {request: 200ms}"))
	body := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	rawRequest(t, g.api.URL, 4096, "/v1/chat/completions", fmt.Sprintf("Content-Length: %d\r\n", len(body)), body)
	line := logLine(t, g.logs, 10*time.Second, `"stream":true`)
	for _, want := range []string{`"upstream":"oa"`, `"attempts":1`} {
		if !strings.Contains(line, want) {
			t.Errorf("the unread stream's line lacks %s: %s", want, line)
		}
	}
	// The write bound and the call's deadline are the same instant: whichever the gateway
	// sees first names the cut (the caller's write failed, or the request timed out).
	if !strings.Contains(line, `"class":"canceled"`) && !strings.Contains(line, `"class":"timeout"`) {
		t.Errorf("the unread stream's line is not cut at the request deadline: %s", line)
	}
	resp, b := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the next caller got %d %s", resp.StatusCode, b)
	}
}

// Without a request deadline, a caller that stops reading a stream is cut once a write
// to it has waited timeouts.idle.
func TestUnreadStreamIsCutAfterTheIdleTimeout(t *testing.T) {
	oa := newVendor(t, "openai")
	floodStream(oa)
	g := startGateway(t, oneUpstreamConfig(oa, "timeouts: {idle: 200ms}"))
	body := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	rawRequest(t, g.api.URL, 4096, "/v1/chat/completions", fmt.Sprintf("Content-Length: %d\r\n", len(body)), body)
	line := logLine(t, g.logs, 10*time.Second, `"stream":true`)
	for _, want := range []string{`"upstream":"oa"`, `"attempts":1`, `"class":"canceled"`} {
		if !strings.Contains(line, want) {
			t.Errorf("the unread stream's line lacks %s: %s", want, line)
		}
	}
	resp, b := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the next caller got %d %s", resp.StatusCode, b)
	}
}

// A caller that reads a stream slowly, but keeps reading, gets all of it, even when
// the whole stream takes longer than timeouts.idle: the bound is on each write. The
// stream is larger than the sockets hold, so that the gateway's writes wait on the
// caller's reads.
func TestSlowButReadingCallerGetsTheWholeStream(t *testing.T) {
	oa := newVendor(t, "openai")
	const chunks = 160
	big := strings.Repeat("x", 64<<10) // 10 MB in all
	oa.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		w.Header().Set("content-type", "text/event-stream")
		for range chunks {
			fmt.Fprintf(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":null}]}`+"\n\n", big)
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
		return true
	})
	g := startGateway(t, oneUpstreamConfig(oa, "timeouts: {idle: 300ms}"))
	body := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	c := rawRequest(t, g.api.URL, 0, "/v1/chat/completions", fmt.Sprintf("Content-Length: %d\r\n", len(body)), body)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a safety net only
	var got []byte
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil || bytes.Contains(got[max(len(got)-n-16, 0):], []byte("data: [DONE]")) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if !bytes.Contains(got, []byte("data: [DONE]")) || strings.Count(string(got), big) != chunks {
		t.Fatalf("the slow caller got %d of %d chunks, and no end", strings.Count(string(got), big), chunks)
	}
	if line := logLine(t, g.logs, 5*time.Second, `"stream":true`); !strings.Contains(line, `"status":200`) || strings.Contains(line, `"class"`) {
		t.Errorf("the slow caller's stream was logged as failed: %s", line)
	}
}

// A caller that never reads a large one-shot answer does not hold the handler: a
// shutdown does not wait for it through the grace.
func TestUnreadOneShotAnswerDoesNotHoldShutdown(t *testing.T) {
	oa := newVendor(t, "openai")
	text := strings.Repeat("word ", 4<<20) // 20 MB, more than the sockets hold
	oa.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		w.Header().Set("content-type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"`+
			text+`"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`)
		return true
	})
	cfg, err := llmgateway.Parse([]byte(oneUpstreamConfig(oa, "timeouts: {idle: 200ms}\nshutdown_grace: 5s")), env(baseEnv...))
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	g, err := llmgateway.New(cfg, llmgateway.WithLogger(slog.New(slog.NewJSONHandler(logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	api, adm := loopbackListeners(t)
	go g.Serve(api, adm)
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	rawRequest(t, api.Addr().String(), 4096, "/v1/chat/completions", fmt.Sprintf("Content-Length: %d\r\n", len(body)), body)
	logLine(t, logs, 10*time.Second, `"status":200`) // written before the answer
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown waited for the caller that does not read its answer: %v", err)
	}
}

// A write bound set for one request does not cut a later one on the same connection,
// nor an answer that comes after a call longer than the bound.
func TestKeptAliveConnectionOutlivesTheWriteBound(t *testing.T) {
	oa := newVendor(t, "openai")
	oa.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		time.Sleep(300 * time.Millisecond)
		return false
	})
	g := startGateway(t, oneUpstreamConfig(oa, "timeouts: {idle: 100ms}"))
	reused := 0
	for i := range 2 {
		req, _ := http.NewRequest(http.MethodPost, g.api.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer gw-key-a")
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(ci httptrace.GotConnInfo) {
				if ci.Reused {
					reused++
				}
			},
		}))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "hello from openai") {
			t.Fatalf("request %d: %d %s %v", i+1, resp.StatusCode, b, err)
		}
	}
	if reused != 1 {
		t.Fatalf("the second request did not reuse the connection")
	}
}

// A caller that goes away while its stream is being written to it is logged with the
// upstream that served the stream and its attempts, not with empty ones.
func TestCallerGoneMidStreamIsLoggedWithItsUpstream(t *testing.T) {
	oa := newVendor(t, "openai")
	floodStream(oa)
	g := startGateway(t, oneUpstreamConfig(oa, ""))
	body := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	c := rawRequest(t, g.api.URL, 4096, "/v1/chat/completions", fmt.Sprintf("Content-Length: %d\r\n", len(body)), body)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a safety net only
	if _, err := io.ReadFull(c, make([]byte, 16<<10)); err != nil {
		t.Fatalf("reading the stream: %v", err)
	}
	c.Close()
	line := logLine(t, g.logs, 10*time.Second, `"stream":true`)
	for _, want := range []string{`"upstream":"oa"`, `"attempts":1`, `"class":"canceled"`} {
		if !strings.Contains(line, want) {
			t.Errorf("the line of the caller gone mid-stream lacks %s: %s", want, line)
		}
	}
}
