package llmgateway_test

import (
	"context"
	"io"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/llmclient/llmclient/llmgateway"
)

// TestAuditDefaultLoggerLevelAndReload: with the default logger (stderr), "log.level:
// warn turns the access log off", the level is reloadable, and the lines buffered are
// written at shutdown. os.Stderr is swapped for a pipe while the Gateway is built, so
// that the default logger writes there.
func TestAuditDefaultLoggerLevelAndReload(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	yaml := baseConfig(oa, an, "") // log: {level: warn}
	cfg, err := parseWith(yaml)
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	g, err := llmgateway.New(cfg)
	os.Stderr = stderr
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		out <- string(b)
	}()
	api := httptest.NewServer(g.Handler())
	post(t, api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","messages":[{"role":"user","content":"at warn"}]}`)
	info, err := parseWith(strings.Replace(yaml, "log: {level: warn}", "log: {level: info}", 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Reload(info); err != nil {
		t.Fatal(err)
	}
	post(t, api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o","messages":[{"role":"user","content":"at info"}]}`)
	api.Close()
	if err := g.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.Close()
	logs := <-out
	if n := strings.Count(logs, `"msg":"request"`); n != 1 {
		t.Fatalf("%d access log lines, want 1 (the request made at info):\n%s", n, logs)
	}
	if strings.Contains(logs, "gw-key-a") || strings.Contains(logs, "at info") {
		t.Fatalf("a key or a prompt in the log:\n%s", logs)
	}
}
