// Command gateway is a walkthrough of llmgateway with no API key: it starts two
// simulated vendor APIs on loopback (an OpenAI-compatible one that is rate limited on
// its first call and an Anthropic one), puts the gateway in front of them from a YAML
// configuration, and calls it the way a Python or Node service would, with plain
// HTTP: a one-shot chat answered after a Retry-After, a stream failed over to the
// other vendor, the Anthropic front door served by the OpenAI upstream, a model the
// key may not call, an unknown key, and an operator draining an upstream through the
// admin API.
//
//	go run ./examples/gateway      (from the repository root: cd examples/gateway && go run .)
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"github.com/llmclient/llmclient/llmgateway"
)

const config = `
listen: 127.0.0.1:0
log: {level: warn}
admin: {listen: 127.0.0.1:0, token_env: DEMO_ADMIN_TOKEN}
retry: {backoff_initial: 10ms, backoff_max: 50ms}
upstreams:
  - name: openai-sim
    vendor: openai
    base_url: %s/v1
    keys_env: [DEMO_OPENAI_KEY]
    models: {smart: gpt-4o, gpt-4o: gpt-4o}
  - name: anthropic-sim
    vendor: anthropic
    base_url: %s
    keys_env: [DEMO_ANTHROPIC_KEY]
    models: {smart: claude-sonnet-4-5}
groups:
  - {name: smart, upstreams: [openai-sim, anthropic-sim]}
tenants:
  - {name: web, keys_env: [DEMO_WEB_KEY], models: [smart, gpt-4o]}
`

var demoEnv = map[string]string{
	"DEMO_ADMIN_TOKEN": "demo-admin", "DEMO_OPENAI_KEY": "sk-sim-openai",
	"DEMO_ANTHROPIC_KEY": "sk-sim-anthropic", "DEMO_WEB_KEY": "gw-web",
}

var logOut io.Writer = io.Discard

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// demo is the running walkthrough: two simulated vendors and the gateway.
type demo struct {
	openai, anthropic *http.Server
	g                 *llmgateway.Gateway
	api, admin        string
	served            chan error
	calls             atomic.Int64
}

func run(out io.Writer) error {
	d, err := start()
	if err != nil {
		return err
	}
	defer d.stop()
	step := func(title, method, path, key, body string, hdr ...string) error {
		fmt.Fprintf(out, "\n== %s\n$ curl -X %s %s%s\n", title, method, "http://gateway", path)
		base := d.api
		if strings.HasPrefix(path, "/admin") {
			base = d.admin
		}
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		fmt.Fprintf(out, "HTTP %d  upstream=%s attempts=%s overhead_ms=%s\n", resp.StatusCode,
			resp.Header.Get("x-llmclient-upstream"), resp.Header.Get("x-llmclient-attempts"), resp.Header.Get("x-llmclient-overhead-ms"))
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for n := 0; sc.Scan(); n++ {
			if line := sc.Text(); line != "" && n < 20 {
				fmt.Fprintln(out, "  "+line)
			}
		}
		return sc.Err()
	}
	chat := `{"model":"smart","messages":[{"role":"user","content":"Say hello."}]}`
	for _, s := range []struct{ title, method, path, key, body string }{
		{"one-shot chat: the first call is rate limited, the gateway waits Retry-After and retries", "POST", "/v1/chat/completions", "gw-web", chat},
		{"stream: OpenAI is now failing, the stream is failed over to Anthropic before its first token", "POST", "/v1/chat/completions", "gw-web",
			`{"model":"smart","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Say hello."}]}`},
		{"Anthropic front door, streaming, answered by whichever upstream serves", "POST", "/v1/messages", "gw-web",
			`{"model":"smart","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Say hello."}]}`},
		{"a model this key may not call: 403 in OpenAI's shape, no upstream call", "POST", "/v1/chat/completions", "gw-web",
			`{"model":"o3","messages":[{"role":"user","content":"hi"}]}`},
		{"an unknown key: 401", "POST", "/v1/chat/completions", "nope", chat},
		{"admin: drain openai-sim", "POST", "/admin/upstreams/openai-sim/drain", "demo-admin", ""},
	} {
		if err := step(s.title, s.method, s.path, s.key, s.body); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "\nthe simulated vendors were called %d times in all\n", d.calls.Load())
	return nil
}

func start() (*demo, error) {
	d := &demo{served: make(chan error, 1)}
	oaLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	anLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d.openai = &http.Server{Handler: http.HandlerFunc(d.serveOpenAI)}
	d.anthropic = &http.Server{Handler: http.HandlerFunc(d.serveAnthropic)}
	go func() { _ = d.openai.Serve(oaLn) }()
	go func() { _ = d.anthropic.Serve(anLn) }()
	cfg, err := llmgateway.Parse([]byte(fmt.Sprintf(config, "http://"+oaLn.Addr().String(), "http://"+anLn.Addr().String())),
		func(k string) (string, bool) { v, ok := demoEnv[k]; return v, ok })
	if err != nil {
		d.stop()
		return nil, err
	}
	d.g, err = llmgateway.New(cfg, llmgateway.WithLogger(slog.New(slog.NewTextHandler(logOut, nil))))
	if err != nil {
		d.stop()
		return nil, err
	}
	api, _ := net.Listen("tcp", "127.0.0.1:0")
	admin, _ := net.Listen("tcp", "127.0.0.1:0")
	d.api, d.admin = "http://"+api.Addr().String(), "http://"+admin.Addr().String()
	go func() { d.served <- d.g.Serve(api, admin) }()
	return d, nil
}

func (d *demo) stop() {
	if d.g != nil {
		_ = d.g.Shutdown(context.Background())
		<-d.served
	}
	_ = d.openai.Close()
	_ = d.anthropic.Close()
}

// serveOpenAI answers its first call with a 429 and Retry-After, its second with a
// reply, and fails with 503 from then on.
func (d *demo) serveOpenAI(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	n := d.calls.Add(1)
	w.Header().Set("content-type", "application/json")
	switch {
	case n == 1:
		w.Header().Set("retry-after-ms", "200")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
	case n == 2:
		io.WriteString(w, `{"id":"chatcmpl-sim","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from the OpenAI simulator."},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":6,"total_tokens":15}}`)
	default:
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"message":"The engine is currently overloaded","type":"service_unavailable_error","param":null,"code":"server_is_overloaded"}}`)
	}
}

func (d *demo) serveAnthropic(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	d.calls.Add(1)
	if !strings.Contains(string(body), `"stream":true`) {
		w.Header().Set("content-type", "application/json")
		io.WriteString(w, `{"id":"msg_sim","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello from the Anthropic simulator."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":7}}`)
		return
	}
	w.Header().Set("content-type", "text/event-stream")
	for _, e := range []string{
		`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_sim","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":1}}}`,
		`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello from "}}`,
		`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"the Anthropic simulator."}}`,
		`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}`,
		`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":7}}`,
		`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
	} {
		io.WriteString(w, e+"\n\n")
		w.(http.Flusher).Flush()
	}
}
