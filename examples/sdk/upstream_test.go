package sdk_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/llmclient/llmclient/provider/openai"
)

// upstream is a local vendor API: it answers its n-th request with steps[n] (the last step
// repeats) and records what it received. Safe for concurrent use.
type upstream struct {
	*httptest.Server
	mu    sync.Mutex
	steps []step
	got   []received
}

type step func(w http.ResponseWriter, r *http.Request)

type received struct {
	Path   string
	Header http.Header
	Body   string
}

func newUpstream(t *testing.T, steps ...step) *upstream {
	t.Helper()
	u := &upstream{steps: steps}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	n := len(u.got)
	u.got = append(u.got, received{Path: r.URL.Path, Header: r.Header.Clone(), Body: string(body)})
	s := u.steps[min(n, len(u.steps)-1)]
	u.mu.Unlock()
	s(w, r)
}

func (u *upstream) requests() []received {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]received(nil), u.got...)
}

func (u *upstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.got)
}

// reply answers with a status, a JSON body and header pairs.
func reply(code int, body string, kv ...string) step {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(kv); i += 2 {
			w.Header().Set(kv[i], kv[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

// events streams server-sent events, flushing each one.
func events(evs ...string) step {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		for _, e := range evs {
			_, _ = io.WriteString(w, e)
			w.(http.Flusher).Flush()
		}
	}
}

// stall sends the event-stream headers and a first event, then nothing until the client
// goes away: a stream stuck before its first token.
func stall(first string) step {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, first)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
}

// Wire payloads in the vendors' documented shapes.
const (
	openaiOK        = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`
	openai429       = `{"error":{"message":"Rate limit reached for gpt-4o-mini on requests per min (RPM): Limit 3, Used 3, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	openai503       = `{"error":{"message":"The server is overloaded or not ready yet.","type":"server_error","param":null,"code":null}}`
	openaiRole      = `data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n"
	openaiStop      = `data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	openaiDone      = "data: [DONE]\n\n"
	anthropicOK     = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello!"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":2}}`
	anthropic529    = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}`
	anthropicStart  = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_2\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n"
	anthropicPing   = "event: ping\ndata: {\"type\":\"ping\"}\n\n"
	anthropicError  = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
	anthropicBlock  = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
	anthropicStop   = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
	anthropicDelta2 = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n"
	anthropicEnd    = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
)

func openaiChunk(text string) string {
	return `data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"` + text + `"},"finish_reason":null}]}` + "\n\n"
}

func anthropicText(text string) string {
	return "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + text + "\"}}\n\n"
}

// newOpenAIClient returns an llmclient.Client with one OpenAI-dialect upstream at base.
func newOpenAIClient(t *testing.T, base string, keys []string, opts ...llmclient.Option) *llmclient.Client {
	t.Helper()
	p, err := openai.New(openai.WithBaseURL(base))
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]llmclient.Option{
		llmclient.WithUpstream(llmclient.Upstream{Name: "openai", Provider: p, Keys: keys}),
		llmclient.WithBackoff(5*time.Millisecond, 10*time.Millisecond),
	}, opts...)
	c, err := llmclient.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newAnthropicClient returns an llmclient.Client with one Anthropic upstream at base.
func newAnthropicClient(t *testing.T, base string, opts ...llmclient.Option) *llmclient.Client {
	t.Helper()
	p, err := anthropic.New(anthropic.WithBaseURL(base))
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]llmclient.Option{
		llmclient.WithUpstream(llmclient.Upstream{Name: "anthropic", Provider: p}),
		llmclient.WithBackoff(5*time.Millisecond, 10*time.Millisecond),
	}, opts...)
	c, err := llmclient.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// counting is a base transport that counts the response bodies it opens and closes, and
// releases its connections when the test ends.
type counting struct {
	base           *http.Transport
	opened, closed atomic.Int64
}

func newCounting(t *testing.T) *counting {
	c := &counting{base: &http.Transport{}}
	t.Cleanup(c.base.CloseIdleConnections)
	return c
}

func (c *counting) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	c.opened.Add(1)
	resp.Body = &countedBody{ReadCloser: resp.Body, closed: &c.closed}
	return resp, nil
}

type countedBody struct {
	io.ReadCloser
	closed *atomic.Int64
	once   sync.Once
}

func (b *countedBody) Close() error {
	b.once.Do(func() { b.closed.Add(1) })
	return b.ReadCloser.Close()
}

// allClosed waits briefly for the bodies the transport closes in the background (a stream
// released by Close) and reports whether every opened body was closed.
func (c *counting) allClosed() bool {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if c.opened.Load() == c.closed.Load() {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

func mustOpenAIProvider(t *testing.T, base string) *openai.Provider {
	t.Helper()
	p, err := openai.New(openai.WithBaseURL(base))
	if err != nil {
		t.Fatal(err)
	}
	return p
}
