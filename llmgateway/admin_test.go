package llmgateway_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func admin(t *testing.T, g *gw, method, path, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, g.admin.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

func TestAdminAPIControlsTheClient(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, `
admin: {listen: 127.0.0.1:0, token_env: ADMIN_TOKEN}
budgets:
  - {name: daily, scope: each_tenant, cap_usd: 10}
`))
	chat := func() int {
		resp, _ := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
		return resp.StatusCode
	}
	for _, p := range []string{"/admin/snapshot", "/admin/budgets"} {
		if code, _ := admin(t, g, "GET", p, ""); code != 401 {
			t.Fatalf("%s without a token: %d", p, code)
		}
		if code, _ := admin(t, g, "GET", p, "wrong"); code != 401 {
			t.Fatalf("%s with a wrong token: %d", p, code)
		}
	}
	if code, _ := admin(t, g, "POST", "/admin/upstreams/oa/drain", "gw-key-a"); code != 401 {
		t.Fatal("a tenant key opened the admin API")
	}
	if chat() != 200 {
		t.Fatal("first call")
	}
	code, body := admin(t, g, "GET", "/admin/snapshot", "admin-secret")
	m := decode(t, body)
	if code != 200 || at(m, "upstreams", 0, "name") != "oa" || at(m, "upstreams", 0, "adapter") != "openai" || at(m, "upstreams", 1, "adapter") != "anthropic" ||
		at(m, "upstreams", 0, "breaker", "state") != "closed" {
		t.Fatalf("snapshot %d: %s", code, body)
	}
	steps := []struct {
		path string
		want int
	}{
		{"/admin/upstreams/oa/drain", 503},
		{"/admin/upstreams/oa/undrain", 200},
		{"/admin/upstreams/oa/breaker/open", 503},
		{"/admin/upstreams/oa/breaker/reset", 200},
		{"/admin/upstreams/oa/keys/key%231/evict", 503},
		{"/admin/upstreams/oa/keys/key%231/restore", 200},
	}
	for _, s := range steps {
		if code, body := admin(t, g, "POST", s.path, "admin-secret"); code != 200 {
			t.Fatalf("%s: %d %s", s.path, code, body)
		}
		if got := chat(); got != s.want {
			t.Fatalf("after %s: status %d, want %d", s.path, got, s.want)
		}
	}
	if code, body := admin(t, g, "POST", "/admin/upstreams/ghost/drain", "admin-secret"); code != 400 || !strings.Contains(body, "ghost") {
		t.Fatalf("unknown upstream: %d %s", code, body)
	}
	code, body = admin(t, g, "GET", "/admin/budgets", "admin-secret")
	if code != 200 || !strings.Contains(body, `"tenant": "a"`) || !strings.Contains(body, `"tenant": "b"`) || !strings.Contains(body, `"cap_usd": 10`) {
		t.Fatalf("budgets %d: %s", code, body)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, _ := admin(t, g, "GET", p, ""); code != 200 {
			t.Fatalf("%s: %d", p, code)
		}
	}
	code, body = admin(t, g, "GET", "/metrics", "")
	for _, want := range []string{"llmgateway_requests_total", `route="openai.chat"`, `tenant="a"`, "llmgateway_overhead_seconds_bucket", "gen_ai_client_operation_duration"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("metrics %d lack %q:\n%.3000s", code, want, body)
		}
	}
	if strings.Contains(body, "gw-key") || strings.Contains(body, "sk-upstream") {
		t.Fatal("a key in the metrics")
	}
	logs := g.logs.String()
	for _, want := range []string{`"msg":"request"`, `"request_id":`, `"tenant":"a"`, `"model":"gpt-4o"`, `"upstream":"oa"`, `"attempts":1`, `"overhead_ms":`} {
		if !strings.Contains(logs, want) {
			t.Fatalf("access log lacks %s:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "gw-key") || strings.Contains(logs, "sk-upstream") || strings.Contains(logs, "admin-secret") {
		t.Fatal("a key in the log")
	}
}

func TestShutdownDrainsOpenStreams(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	release := make(chan struct{})
	oa.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		w.Header().Set("content-type", "text/event-stream")
		for i, c := range []string{`"Hel"`, `"lo"`} {
			if i == 1 {
				<-release
			}
			io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":`+c+`},"finish_reason":null}]}`+"\n\n")
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
		return true
	})
	cfg := baseConfig(oa, an, "admin: {listen: 127.0.0.1:0, token_env: ADMIN_TOKEN}\nshutdown_grace: 20s\n")
	g := startGateway(t, cfg)
	apiLn, _ := net.Listen("tcp", "127.0.0.1:0")
	adminLn, _ := net.Listen("tcp", "127.0.0.1:0")
	served := make(chan error, 1)
	go func() { served <- g.Serve(apiLn, adminLn) }()
	url := "http://" + apiLn.Addr().String()

	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer gw-key-a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if line, _ := rd.ReadString('\n'); !strings.Contains(line, "Hel") {
		t.Fatalf("first line %q", line)
	}
	down := make(chan error, 1)
	go func() { down <- g.Shutdown(context.Background()) }()
	// New connections are refused once shutdown has begun.
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", apiLn.Addr().String(), time.Second)
		if err != nil {
			break
		}
		c.Close()
		if i > 500 {
			t.Fatal("the listener still accepts")
		}
		time.Sleep(2 * time.Millisecond)
	}
	select {
	case err := <-down:
		t.Fatalf("shutdown returned with a stream open: %v", err)
	default:
	}
	close(release)
	rest, _ := io.ReadAll(rd)
	if !strings.Contains(string(rest), "lo") || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Fatalf("the stream did not finish: %q", rest)
	}
	if err := <-down; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
}

func TestShutdownCutsStreamsAfterTheGrace(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	release := make(chan struct{})
	defer close(release)
	oa.setHandler(func(w http.ResponseWriter, r *http.Request, n int) bool {
		w.Header().Set("content-type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}`+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return true
	})
	g := startGateway(t, baseConfig(oa, an, "shutdown_grace: 50ms\n"))
	apiLn, _ := net.Listen("tcp", "127.0.0.1:0")
	served := make(chan error, 1)
	go func() { served <- g.Serve(apiLn, nil) }()
	req, _ := http.NewRequest("POST", "http://"+apiLn.Addr().String()+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer gw-key-a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	_, _ = rd.ReadString('\n')
	start := time.Now()
	if err := g.Shutdown(context.Background()); err == nil {
		t.Fatal("shutdown reported a clean drain with a stream cut")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("shutdown took %v", d)
	}
	rest, _ := io.ReadAll(rd)
	if strings.Contains(string(rest), "[DONE]") {
		t.Fatalf("a cut stream ended cleanly: %q", rest)
	}
	<-served
}

// adminRaw sends an admin request's line, headers (the token's included) and the start
// of its body on a connection of its own, and returns the connection.
func adminRaw(t *testing.T, g *gw, path, head, body string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(g.admin.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_, _ = io.WriteString(c, "POST "+path+" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer admin-secret\r\n"+head+"\r\n"+body)
	return c
}

// An admin client that stalls its body does not hold its handler (nor the listener's
// shutdown): it is answered 408 at the body's bound, timeouts.request, and the control
// it asked for is not applied.
func TestAdminStalledBodyIsAnswered(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, "admin: {listen: 127.0.0.1:0, token_env: ADMIN_TOKEN}\ntimeouts: {request: 200ms}\n"))
	c := adminRaw(t, g, "/admin/upstreams/oa/drain", "Content-Length: 1000\r\n", "{")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a safety net only
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 408 ") {
		t.Fatalf("an admin client whose body stalled got %q, %v; want a 408", line, err)
	}
	if rest, err := io.ReadAll(br); err != nil {
		t.Fatalf("the connection stays open after the 408: %v; read %q", err, rest)
	}
	if _, body := admin(t, g, "GET", "/admin/snapshot", "admin-secret"); at(decode(t, body), "upstreams", 0, "drained") == true {
		t.Fatalf("the drain was applied: %s", body)
	}
}

// An admin request with a body larger than the admin bound is refused 413 without
// reading it, and the control it asked for is not applied.
func TestAdminLargeBodyIsRefused(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, "admin: {listen: 127.0.0.1:0, token_env: ADMIN_TOKEN}\n"))
	for _, tc := range []struct{ name, head, body string }{
		{"declared", "Content-Length: 104857600\r\n", strings.Repeat("x", 1024)},
		{"chunked", "Transfer-Encoding: chunked\r\n", "10000\r\n" + strings.Repeat("x", 1<<16) + "\r\n10\r\n" + strings.Repeat("x", 16) + "\r\n0\r\n\r\n"},
	} {
		c := adminRaw(t, g, "/admin/upstreams/oa/drain", tc.head, tc.body)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a safety net only
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 413 ") {
			t.Errorf("%s: an admin body over the bound got %q, %v; want a 413", tc.name, line, err)
		}
	}
	if _, body := admin(t, g, "GET", "/admin/snapshot", "admin-secret"); at(decode(t, body), "upstreams", 0, "drained") == true {
		t.Fatalf("the drain was applied: %s", body)
	}
	// A small body is read and dropped: the control is applied.
	c := adminRaw(t, g, "/admin/upstreams/oa/drain", "Content-Length: 2\r\n", "{}")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200 ") {
		t.Fatalf("a small admin body got %q, %v", line, err)
	}
	if _, body := admin(t, g, "GET", "/admin/snapshot", "admin-secret"); at(decode(t, body), "upstreams", 0, "drained") != true {
		t.Fatalf("the drain with a small body was not applied: %s", body)
	}
}
