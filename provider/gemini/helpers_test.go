package gemini_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/gemini"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testKey = "AIzaSyTest-0123456789abcdef"

// captured is what the test server saw of one request.
type captured struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// recorder is a loopback server that answers every request with a fixed reply and records
// what it received.
type recorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []captured
}

func (r *recorder) last(t *testing.T) captured {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reqs) == 0 {
		t.Fatal("server received no request")
	}
	return r.reqs[len(r.reqs)-1]
}

// serve starts a server whose handler records the request and then calls reply.
func serve(t *testing.T, reply http.HandlerFunc, opts ...gemini.Option) (*gemini.Provider, *recorder) {
	t.Helper()
	rec := &recorder{}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, captured{Method: r.Method, Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body})
		rec.mu.Unlock()
		reply(w, r)
	}))
	t.Cleanup(rec.srv.Close)
	all := append([]gemini.Option{
		gemini.WithBaseURL(rec.srv.URL),
		gemini.WithHTTPClient(rec.srv.Client()),
		gemini.WithAPIKey(testKey),
	}, opts...)
	p, err := gemini.New(all...)
	if err != nil {
		t.Fatal(err)
	}
	return p, rec
}

// fixed replies with status, headers (alternating key, value) and body.
func fixed(status int, body string, kv ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(kv); i += 2 {
			w.Header().Set(kv[i], kv[i+1])
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// sseReply streams body as text/event-stream.
func sseReply(body string) http.HandlerFunc {
	return fixed(http.StatusOK, body, "Content-Type", "text/event-stream")
}

func userCall(model string, msgs ...llmclient.Message) *llmclient.Call {
	return &llmclient.Call{Model: model, Request: &llmclient.Request{Model: model, Messages: msgs}}
}

// golden compares got (a JSON body) with testdata/name, rewriting the file with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, got, "", "  "); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, got)
	}
	buf.WriteByte('\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("body differs from %s:\ngot:\n%s\nwant:\n%s", path, buf.Bytes(), want)
	}
}

// drain reads st to its end and describes each chunk, then the final error.
func drain(st llmclient.ProviderStream) ([]string, error) {
	var out []string
	for {
		c, err := st.Recv()
		if err != nil {
			if err == io.EOF {
				return out, nil
			}
			return out, err
		}
		out = append(out, describe(c))
	}
}

func describe(c llmclient.Chunk) string {
	// (usage also shows reasoning tokens for Gemini)
	if c.KeepAlive {
		return "keep-alive"
	}
	var parts []string
	if c.ID != "" || c.Model != "" {
		parts = append(parts, fmt.Sprintf("id=%s model=%s", c.ID, c.Model))
	}
	if c.Text != "" {
		parts = append(parts, fmt.Sprintf("text=%q", c.Text))
	}
	if c.Reasoning != "" {
		parts = append(parts, fmt.Sprintf("reasoning=%q", c.Reasoning))
	}
	for _, d := range c.ToolCalls {
		parts = append(parts, fmt.Sprintf("tool[%d]=%s,%s,%s", d.Index, d.ID, d.Name, d.Arguments))
	}
	if c.FinishReason != "" {
		parts = append(parts, fmt.Sprintf("finish=%s(%s)", c.FinishReason, c.RawFinishReason))
	}
	if u := c.Usage; u != nil {
		parts = append(parts, fmt.Sprintf("usage=in:%d,out:%d,total:%d,cached:%d,reasoning:%d", u.InputTokens, u.OutputTokens, u.TotalTokens, u.CachedInputTokens, u.ReasoningTokens))
	}
	return strings.Join(parts, " ")
}

func equalLines(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}
