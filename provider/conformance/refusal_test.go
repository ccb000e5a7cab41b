package conformance_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/provider/openai"
)

// countingTransport answers every request with status and body, counting the calls.
type countingTransport struct {
	calls  atomic.Int32
	status int
	body   string
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	if r.Body != nil {
		r.Body.Close()
	}
	return &http.Response{StatusCode: c.status, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(c.body)), Request: r}, nil
}

// TestRefusalFailsOver checks the adapters' side of a cross-vendor failover through a
// Client: a request that OpenAI cannot take (an image in an assistant turn) is refused
// by the openai adapter before any call, and the Client moves it to the next upstream.
func TestRefusalFailsOver(t *testing.T) {
	tr := &countingTransport{status: 200, body: `{}`}
	oa, err := openai.New(openai.WithHTTPClient(&http.Client{Transport: tr}), openai.WithAPIKey("sk-x"))
	if err != nil {
		t.Fatal(err)
	}
	backup := fake.New(fake.Reply("A cat.").Forever())
	c, err := llmclient.New(
		llmclient.WithUpstream(llmclient.Upstream{Name: "openai", Provider: oa}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "backup", Provider: backup}),
		llmclient.WithModelGroup("m", "openai", "backup"))
	if err != nil {
		t.Fatal(err)
	}
	req := &llmclient.Request{Model: "m", Messages: []llmclient.Message{
		llmclient.UserMessage("Draw a cat."),
		{Role: llmclient.RoleAssistant, Content: []llmclient.Part{llmclient.ImageDataPart("image/png", []byte("\x89PNG\r\n\x1a\nfake"))}},
		llmclient.UserMessage("What is it?"),
	}}
	resp, err := c.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Upstream != "backup" || len(resp.Attempts) != 2 || tr.calls.Load() != 0 {
		t.Fatalf("upstream %q, %d attempts, %d calls to openai", resp.Upstream, len(resp.Attempts), tr.calls.Load())
	}
	if a := resp.Attempts[0]; !a.Local || !errors.Is(a.Err, llmclient.ErrUnsupported) {
		t.Errorf("first attempt %+v, want a local refusal wrapping ErrUnsupported", a)
	}
}

// TestNotesReachTheTrace checks that an adapter's translation notes reach Attempt.Notes.
func TestNotesReachTheTrace(t *testing.T) {
	tr := &countingTransport{status: 200, body: `{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`}
	an, err := anthropic.New(anthropic.WithHTTPClient(&http.Client{Transport: tr}), anthropic.WithAPIKey("sk-ant-x"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{Name: "anthropic", Provider: an}))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Complete(context.Background(), &llmclient.Request{Model: "claude", Temperature: llmclient.Float(1.5),
		Messages: []llmclient.Message{llmclient.UserMessage("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if n := resp.Attempts[0].Notes; len(n) != 1 || n[0] != "anthropic: temperature 1.5 lowered to the maximum 1" {
		t.Errorf("Attempt.Notes = %q", n)
	}
}
