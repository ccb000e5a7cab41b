package llmgateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/llmclient/llmclient/llmgateway"
)

// vendor is a loopback upstream speaking one vendor's wire format. handle, when set,
// answers instead of the default reply; it gets the request number from 0.
type vendor struct {
	*httptest.Server
	kind   string // "openai" or "anthropic"
	mu     sync.Mutex
	n      int
	keys   []string
	bodies []string
	handle func(w http.ResponseWriter, r *http.Request, n int) bool
}

func newVendor(t testing.TB, kind string) *vendor {
	t.Helper()
	v := &vendor{kind: kind}
	v.Server = httptest.NewServer(http.HandlerFunc(v.serve))
	t.Cleanup(v.Close)
	return v
}

func (v *vendor) setHandler(h func(w http.ResponseWriter, r *http.Request, n int) bool) {
	v.mu.Lock()
	v.handle = h
	v.mu.Unlock()
}

func (v *vendor) count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.n
}

func (v *vendor) lastKey() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.keys) == 0 {
		return ""
	}
	return v.keys[len(v.keys)-1]
}

func (v *vendor) lastBody() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.bodies) == 0 {
		return ""
	}
	return v.bodies[len(v.bodies)-1]
}

func (v *vendor) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	v.mu.Lock()
	n := v.n
	v.n++
	key := r.Header.Get("x-api-key")
	if k, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		key = k
	}
	v.keys = append(v.keys, key)
	v.bodies = append(v.bodies, string(body))
	h := v.handle
	v.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if h != nil && h(w, r, n) {
		return
	}
	stream := bytes.Contains(body, []byte(`"stream":true`))
	switch {
	case strings.HasSuffix(r.URL.Path, "/embeddings"):
		var req struct {
			Input []string `json:"input"`
		}
		_ = json.Unmarshal(body, &req)
		var data []string
		for i := range req.Input {
			data = append(data, fmt.Sprintf(`{"object":"embedding","index":%d,"embedding":[0.5,-0.25,%d]}`, i, i))
		}
		w.Header().Set("content-type", "application/json")
		fmt.Fprintf(w, `{"object":"list","data":[%s],"model":"emb-up","usage":{"prompt_tokens":%d,"total_tokens":%d}}`, strings.Join(data, ","), 2*len(req.Input), 2*len(req.Input))
	case v.kind == "openai" && !stream:
		w.Header().Set("content-type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-up","object":"chat.completion","created":1,"model":"gpt-up","choices":[{"index":0,"message":{"role":"assistant","content":"hello from openai"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`)
	case v.kind == "openai":
		w.Header().Set("content-type", "text/event-stream")
		for _, c := range []string{
			`{"id":"chatcmpl-up","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}`,
			`{"id":"chatcmpl-up","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}`,
			`{"id":"chatcmpl-up","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`{"id":"chatcmpl-up","object":"chat.completion.chunk","created":1,"model":"gpt-up","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`,
			`[DONE]`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", c)
			w.(http.Flusher).Flush()
		}
	case v.kind == "anthropic" && !stream:
		w.Header().Set("content-type", "application/json")
		io.WriteString(w, `{"id":"msg_up","type":"message","role":"assistant","model":"claude-up","content":[{"type":"text","text":"hello from anthropic"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":3}}`)
	default:
		w.Header().Set("content-type", "text/event-stream")
		writeAnthropicStream(w, "Hel", "lo")
	}
}

func writeAnthropicStream(w http.ResponseWriter, texts ...string) {
	ev := func(name, data string) {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
		w.(http.Flusher).Flush()
	}
	ev("message_start", `{"type":"message_start","message":{"id":"msg_up","type":"message","role":"assistant","model":"claude-up","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}`)
	ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	for _, t := range texts {
		b, _ := json.Marshal(t)
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+string(b)+`}}`)
	}
	ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
	ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}`)
	ev("message_stop", `{"type":"message_stop"}`)
}

// env is a fixed environment for configurations.
func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// baseEnv holds the keys every test configuration names.
var baseEnv = []string{"UP_KEY", "sk-upstream-1", "TENANT_A", "gw-key-a", "TENANT_B", "gw-key-b", "ADMIN_TOKEN", "admin-secret"}

// baseConfig is an openai upstream "oa" and an anthropic upstream "an": gpt-* goes to
// oa, claude-* to an; tenant a may call everything, tenant b only gpt-4o-mini.
func baseConfig(oa, an *vendor, extra string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
log: {level: warn}
retry: {backoff_initial: 1ms, backoff_max: 2ms, max_attempts: 2}
upstreams:
  - name: oa
    vendor: openai
    base_url: %s/v1
    keys_env: [UP_KEY]
    models: {gpt-4o: gpt-4o, gpt-4o-mini: gpt-4o-mini, text-embedding-3-small: text-embedding-3-small, any: gpt-4o, both: gpt-4o}
  - name: an
    vendor: anthropic
    base_url: %s
    keys_env: [UP_KEY]
    models: {claude-sonnet: claude-sonnet-4-5, any: claude-sonnet-4-5, both: claude-sonnet-4-5}
groups:
  - name: both
    upstreams: [oa, an]
tenants:
  - name: a
    keys_env: [TENANT_A]
    models: ["*"]
  - name: b
    keys_env: [TENANT_B]
    models: [gpt-4o-mini]
%s`, oa.URL, an.URL, extra)
}

// gw is a Gateway under test, served on loopback.
type gw struct {
	*llmgateway.Gateway
	api, admin *httptest.Server
	logs       *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startGateway(t *testing.T, yaml string, kv ...string) *gw {
	t.Helper()
	g := newGW(t, yaml, kv...)
	t.Cleanup(g.close)
	return g
}

func startGatewayB(b *testing.B, yaml string, kv ...string) *gw {
	b.Helper()
	g := newGW(b, yaml, kv...)
	b.Cleanup(g.close)
	return g
}

func (g *gw) close() {
	g.api.Close()
	g.admin.Close()
	_ = g.Shutdown(context.Background())
}

func newGW(t testing.TB, yaml string, kv ...string) *gw {
	t.Helper()
	cfg, err := llmgateway.Parse([]byte(yaml), env(append(append([]string{}, baseEnv...), kv...)...))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	logs := &syncBuffer{}
	g, err := llmgateway.New(cfg, llmgateway.WithLogger(slog.New(slog.NewJSONHandler(logs, nil))))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	out := &gw{Gateway: g, logs: logs}
	out.api = httptest.NewServer(g.Handler())
	out.admin = httptest.NewServer(g.AdminHandler())
	return out
}

// writeConfig writes yaml to a file in a temporary folder.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// post sends a JSON body with a gateway key and returns the response and its body.
func post(t *testing.T, url, key, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("content-type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// sseEvent is one server-sent event.
type sseEvent struct{ name, data string }

func parseSSE(t *testing.T, body string) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" || cur.name != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		}
	}
	return out
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("not JSON: %v: %s", err, s)
	}
	return m
}

// at walks a decoded JSON value by keys and indexes.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// loopbackListeners opens two listeners on loopback ports, for the API and the admin API.
func loopbackListeners(t *testing.T) (api, admin net.Listener) {
	t.Helper()
	var ls [2]net.Listener
	for i := range ls {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = l
	}
	return ls[0], ls[1]
}
