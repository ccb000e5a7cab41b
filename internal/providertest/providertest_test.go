package providertest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/internal/providertest"
)

// script is a ProviderStream that returns its chunks, then err.
type script struct {
	chunks []llmclient.Chunk
	err    error
	closed bool
}

func (s *script) Recv() (llmclient.Chunk, error) {
	if len(s.chunks) == 0 {
		return llmclient.Chunk{}, s.err
	}
	c := s.chunks[0]
	s.chunks = s.chunks[1:]
	return c, nil
}

func (s *script) Close() error { s.closed = true; return nil }

func TestDescribe(t *testing.T) {
	tests := []struct {
		c    llmclient.Chunk
		want string
	}{
		{llmclient.Chunk{KeepAlive: true, Text: "ignored"}, "keep-alive"},
		{llmclient.Chunk{}, ""},
		{llmclient.Chunk{ID: "r1", Text: "a\"b", Reasoning: "hm"}, `id=r1 model= text="a\"b" reasoning="hm"`},
		{llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 2, ID: "t", Name: "f", Arguments: "{}"}, {Index: 3}}},
			"tool[2]=t,f,{} tool[3]=,,"},
		{llmclient.Chunk{FinishReason: finish.Stop, RawFinishReason: "STOP",
			Usage: &llmclient.Usage{InputTokens: 1, OutputTokens: 2, TotalTokens: 3, CachedInputTokens: 4, ReasoningTokens: 5}},
			"finish=stop(STOP) usage=in:1,out:2,total:3,cached:4,reasoning:5"},
		{llmclient.Chunk{Usage: &llmclient.Usage{InputTokens: 9, CacheWriteTokens: 6}},
			"usage=in:9,out:0,total:0,cached:0,reasoning:0,cache_write:6"},
	}
	for _, tt := range tests {
		if got := providertest.Describe(tt.c); got != tt.want {
			t.Errorf("Describe(%+v) = %q, want %q", tt.c, got, tt.want)
		}
	}
}

func TestDrain(t *testing.T) {
	got, err := providertest.Drain(&script{chunks: []llmclient.Chunk{{Text: "a"}, {KeepAlive: true}}, err: io.EOF})
	if err != nil || strings.Join(got, "|") != `text="a"|keep-alive` {
		t.Errorf("clean end: %q, %v", got, err)
	}
	boom := errors.New("boom")
	if got, err := providertest.Drain(&script{chunks: []llmclient.Chunk{{Text: "a"}}, err: boom}); err != boom || len(got) != 1 {
		t.Errorf("failed end: %q, %v", got, err)
	}
}

func TestFuzzRecv(t *testing.T) {
	st := &script{chunks: []llmclient.Chunk{{Text: "a"}, {FinishReason: finish.Stop}}, err: io.EOF}
	finished, err := providertest.FuzzRecv(t, st, 5)
	if !finished || err != io.EOF || !st.closed {
		t.Errorf("FuzzRecv = %v, %v; closed %v", finished, err, st.closed)
	}
	chunks, err := providertest.RecvAll(t, &script{chunks: make([]llmclient.Chunk, 3), err: io.EOF}, 3)
	if len(chunks) != 3 || err != io.EOF {
		t.Errorf("RecvAll = %d chunks, %v", len(chunks), err)
	}
}

func TestServer(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Fixed(http.StatusTeapot, `{"x":1}`, "X-A", "b"))
	if srv.Len() != 0 {
		t.Fatal("requests before any was sent")
	}
	resp, err := srv.Client().Post(srv.URL+"/v1/x%2Fy?alt=sse", "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot || string(body) != `{"x":1}` || resp.Header.Get("X-A") != "b" ||
		resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("reply %d %q %v", resp.StatusCode, body, resp.Header)
	}
	got := srv.Last(t)
	if srv.Len() != 1 || got.Method != http.MethodPost || got.URI != "/v1/x%2Fy?alt=sse" || got.Path != "/v1/x/y" ||
		got.RawQuery != "alt=sse" || string(got.Body) != "hello" || got.Header.Get("Content-Type") != "text/plain" {
		t.Errorf("recorded %+v", got)
	}
}

func TestSSEAndDrop(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE("data: 1\n\n"))
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" || string(body) != "data: 1\n\n" {
		t.Errorf("SSE reply %v %q", resp.Header, body)
	}

	drop := providertest.NewServer(t, providertest.Drop("data: 1\n\n"))
	resp, err = drop.Client().Get(drop.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) || string(body) != "data: 1\n\n" {
		t.Errorf("Drop: read %q, %v; want the head then io.ErrUnexpectedEOF", body, err)
	}
}

func TestStall(t *testing.T) {
	release := make(chan struct{})
	srv := providertest.NewServer(t, providertest.Stall("data: 1\n\n", release))
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	head := make([]byte, len("data: 1\n\n"))
	if _, err := io.ReadFull(resp.Body, head); err != nil || string(head) != "data: 1\n\n" {
		t.Fatalf("head %q, %v", head, err)
	}
	close(release)
	if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) != 0 {
		t.Errorf("after release: %q, %v", rest, err)
	}
}

func TestGolden(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.Mkdir("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	providertest.Golden(t, "x.json", []byte(`{"b":[1,2],"a":"x"}`), true)
	written, err := os.ReadFile(filepath.Join("testdata", "x.json"))
	if err != nil || string(written) != "{\n  \"b\": [\n    1,\n    2\n  ],\n  \"a\": \"x\"\n}\n" {
		t.Fatalf("written %q, %v", written, err)
	}
	providertest.Golden(t, "x.json", []byte(`{"b": [1, 2], "a": "x"}`), false) // same JSON, other spacing
}

func TestEstimator(t *testing.T) {
	var e providertest.Estimator
	if n := e.CountTokens("m", "hello world"); n != 1 {
		t.Errorf("CountTokens = %d", n)
	}
	e.CountTokens("m", `{"a":1}`)
	if !e.Counted("hello world") || e.Counted("hello") || !e.CountedPart("hello") || e.CountedPart("nope") {
		t.Errorf("texts %q", e.Texts())
	}
	texts := e.Texts()
	texts[0] = "changed"
	if !e.Counted("hello world") {
		t.Error("Texts returned the estimator's own slice")
	}
}

// provider answers Complete with err, or with a response when err is nil.
type provider struct{ err error }

func (p provider) Complete(context.Context, *llmclient.Call) (*llmclient.Response, error) {
	if p.err != nil {
		return nil, p.err
	}
	return &llmclient.Response{Text: "ok"}, nil
}

func (p provider) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return &script{chunks: []llmclient.Chunk{{Text: "ok"}}, err: io.EOF}, p.err
}

func TestCompleteHelpers(t *testing.T) {
	call := providertest.UserCall("m", llmclient.UserMessage("hi"))
	if call.Model != "m" || call.Request.Model != "m" || len(call.Request.Messages) != 1 {
		t.Fatalf("UserCall = %+v", call)
	}
	if resp := providertest.Complete(t, provider{}, call); resp.Text != "ok" {
		t.Errorf("Complete = %+v", resp)
	}
	providertest.Exchange(t, provider{}, call, false)
	providertest.Exchange(t, provider{}, call, true)
	bad := &llmclient.Error{Class: failure.BadRequest, Message: "vendor: no"}
	if e := providertest.CompleteError(t, provider{err: bad}, call); e != bad {
		t.Errorf("CompleteError = %v", e)
	}
	providertest.CheckBadRequest(t, provider{err: bad}, "vendor", call)
	providertest.CheckClass(t, bad, failure.BadRequest, 0, 0)
}

func TestConversation(t *testing.T) {
	req := providertest.Conversation()
	if len(req.Messages) != 11 || req.Messages[0].Role != llmclient.RoleSystem || len(req.Tools) != 1 {
		t.Errorf("Conversation = %d messages, %d tools", len(req.Messages), len(req.Tools))
	}
}
