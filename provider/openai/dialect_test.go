package openai_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/provider/openai"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mustNew(t testing.TB, opts ...openai.Option) *openai.Provider {
	t.Helper()
	p, err := openai.New(opts...)
	require.NoError(t, err)
	return p
}

func TestDialectBaseURL(t *testing.T) {
	tests := []struct {
		opts []openai.Option
		want string
	}{
		{nil, "https://api.openai.com/v1"},
		{[]openai.Option{openai.WithBaseURL("http://localhost:8000/v1/")}, "http://localhost:8000/v1"},
		{[]openai.Option{openai.WithBaseURL("https://openrouter.ai/api/v1")}, "https://openrouter.ai/api/v1"},
		{[]openai.Option{openai.WithAzure("https://res.openai.azure.com", "2024-10-21")}, "https://res.openai.azure.com"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, mustNew(t, tt.opts...).BaseURL())
	}
}

func TestDialectInspect(t *testing.T) {
	p := mustNew(t)
	tests := []struct {
		name, method, path, body string
		ok                       bool
		want                     llmclient.APICall
		messages, tools, images  int
		format                   bool
	}{
		{
			name: "chat", method: "POST", path: "/chat/completions", ok: true,
			body: `{"model":"gpt-4o","stream":true,"max_completion_tokens":50,"max_tokens":10,
				"messages":[{"role":"developer","content":"Be brief."},
				{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}}]},
				{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"look","arguments":"{\"q\":1}"}}]},
				{"role":"tool","tool_call_id":"call_1","content":"a cat"}],
				"tools":[{"type":"function","function":{"name":"look","description":"Look.","parameters":{"type":"object"}}}],
				"response_format":{"type":"json_schema","json_schema":{"name":"out","schema":{"type":"object"}}}}`,
			want:     llmclient.APICall{Shape: openai.ShapeChatCompletions, Stream: true, Request: llmclient.Request{Model: "gpt-4o", MaxTokens: 50}},
			messages: 4, tools: 1, images: 1, format: true,
		},
		{
			name: "chat with max_tokens only", method: "POST", path: "/chat/completions", ok: true,
			body: `{"model":"deepseek-chat","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
			want: llmclient.APICall{Shape: openai.ShapeChatCompletions, Request: llmclient.Request{Model: "deepseek-chat", MaxTokens: 10}}, messages: 1,
		},
		{
			name: "responses", method: "POST", path: "/responses", ok: true,
			body: `{"model":"o4-mini","stream":true,"max_output_tokens":99,"instructions":"Be brief.",
				"input":[{"role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_image","detail":"high","image_url":"https://x"}]},
				{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
				{"type":"function_call_output","call_id":"c1","output":"42"},
				{"type":"reasoning","id":"rs_1","summary":[]}],
				"tools":[{"type":"function","name":"f","description":"F.","parameters":{"type":"object"}},{"type":"web_search"}],
				"text":{"format":{"type":"json_schema","name":"o","schema":{"type":"object"}}}}`,
			want:     llmclient.APICall{Shape: openai.ShapeResponses, Stream: true, Request: llmclient.Request{Model: "o4-mini", MaxTokens: 99}},
			messages: 4, tools: 1, images: 1, format: true,
		},
		{
			name: "responses with a string input", method: "POST", path: "/responses", ok: true,
			body:     `{"model":"gpt-4.1","input":"hello"}`,
			want:     llmclient.APICall{Shape: openai.ShapeResponses, Request: llmclient.Request{Model: "gpt-4.1"}},
			messages: 1,
		},
		{
			name: "responses with a prompt cache key", method: "POST", path: "/responses", ok: true,
			body:     `{"model":"gpt-4.1","prompt_cache_key":"tenant-9","input":"hello"}`,
			want:     llmclient.APICall{Shape: openai.ShapeResponses, Request: llmclient.Request{Model: "gpt-4.1", PromptCacheKey: "tenant-9"}},
			messages: 1,
		},
		{
			name: "chat with a prompt cache key", method: "POST", path: "/chat/completions", ok: true,
			body:     `{"model":"gpt-4.1","prompt_cache_key":"tenant-9","messages":[{"role":"user","content":"hi"}]}`,
			want:     llmclient.APICall{Shape: openai.ShapeChatCompletions, Request: llmclient.Request{Model: "gpt-4.1", PromptCacheKey: "tenant-9"}},
			messages: 1,
		},
		{
			name: "embeddings of strings", method: "POST", path: "/embeddings", ok: true,
			body:     `{"model":"text-embedding-3-small","input":["a","b","c"]}`,
			want:     llmclient.APICall{Shape: openai.ShapeEmbeddings, NoOutput: true, Request: llmclient.Request{Model: "text-embedding-3-small"}},
			messages: 3,
		},
		{
			name: "embeddings of token ids", method: "POST", path: "/embeddings", ok: true,
			body: `{"model":"text-embedding-3-small","input":[[1,2,3],[4,5]]}`,
			want: llmclient.APICall{Shape: openai.ShapeEmbeddings, NoOutput: true, TokenIDs: 5, Request: llmclient.Request{Model: "text-embedding-3-small"}},
		},
		{
			name: "embeddings of one token list", method: "POST", path: "/embeddings", ok: true,
			body: `{"model":"m","input":[1,2,3,4]}`,
			want: llmclient.APICall{Shape: openai.ShapeEmbeddings, NoOutput: true, TokenIDs: 4, Request: llmclient.Request{Model: "m"}},
		},
		{
			name: "azure deployment path", method: "POST", path: "/openai/deployments/gpt4o-prod/chat/completions", ok: true,
			body:     `{"messages":[{"role":"user","content":"hi"}]}`,
			want:     llmclient.APICall{Shape: openai.ShapeChatCompletions, Request: llmclient.Request{Model: "gpt4o-prod"}},
			messages: 1,
		},
		{
			name: "odd field keeps the rest", method: "POST", path: "/chat/completions", ok: true,
			body:     `{"model":"gpt-4o","max_tokens":"many","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			want:     llmclient.APICall{Shape: openai.ShapeChatCompletions, Stream: true, Request: llmclient.Request{Model: "gpt-4o"}},
			messages: 1,
		},
		{
			name: "unbuffered body", method: "POST", path: "/chat/completions", ok: true,
			want: llmclient.APICall{Shape: openai.ShapeChatCompletions},
		},
		{
			name: "not JSON", method: "POST", path: "/chat/completions", ok: true, body: "<xml/>",
			want: llmclient.APICall{Shape: openai.ShapeChatCompletions},
		},
		{name: "list stored completions", method: "GET", path: "/chat/completions"},
		{name: "retrieve a response", method: "POST", path: "/responses/resp_1/cancel"},
		{name: "models", method: "GET", path: "/models"},
		{name: "files", method: "POST", path: "/files"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body []byte
			if tt.body != "" {
				body = []byte(tt.body)
			}
			got, ok := p.Inspect(tt.method, tt.path, body)
			require.Equal(t, tt.ok, ok)
			if !ok {
				return
			}
			assert.Equal(t, tt.want.Shape, got.Shape)
			assert.Equal(t, tt.want.Stream, got.Stream)
			assert.Equal(t, tt.want.NoOutput, got.NoOutput)
			assert.Equal(t, tt.want.TokenIDs, got.TokenIDs)
			assert.Equal(t, tt.want.Request.Model, got.Request.Model)
			assert.Equal(t, tt.want.Request.MaxTokens, got.Request.MaxTokens)
			assert.Equal(t, tt.want.Request.PromptCacheKey, got.Request.PromptCacheKey)
			assert.Len(t, got.Request.Messages, tt.messages)
			assert.Len(t, got.Request.Tools, tt.tools)
			assert.Equal(t, tt.format, got.Request.ResponseFormat != nil)
			images := 0
			for _, m := range got.Request.Messages {
				for _, part := range m.Content {
					if part.Type == llmclient.PartImage {
						images++
					}
				}
			}
			assert.Equal(t, tt.images, images)
		})
	}
}

// TestDialectInspectCountsTheText checks that the text reaches the estimate: a long prompt
// costs more than a short one.
func TestDialectInspectCountsTheText(t *testing.T) {
	p := mustNew(t)
	short, _ := p.Inspect("POST", "/chat/completions", []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`))
	long, _ := p.Inspect("POST", "/chat/completions", []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"`+strings.Repeat("word ", 1000)+`"}]}`))
	s := llmclient.EstimatePromptTokens(nil, &short.Request)
	l := llmclient.EstimatePromptTokens(nil, &long.Request)
	assert.Less(t, s, 20)
	assert.InDelta(t, 1000, l, 150)
}

func TestDialectAuthorize(t *testing.T) {
	tests := []struct {
		name   string
		opts   []openai.Option
		key    string
		header string
		want   string
	}{
		{"pool key", nil, "sk-pool", "Authorization", "Bearer sk-pool"},
		{"own key", []openai.Option{openai.WithAPIKey("sk-own")}, "", "Authorization", "Bearer sk-own"},
		{"no key", nil, "", "Authorization", ""},
		{"azure", []openai.Option{openai.WithAzure("https://r.openai.azure.com", "v")}, "az-key", "Api-Key", "az-key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{"Authorization": {"Bearer sk-caller"}, "Api-Key": {"az-caller"}, "Openai-Beta": {"x"}}
			mustNew(t, tt.opts...).Authorize(h, tt.key)
			assert.Equal(t, tt.want, h.Get(tt.header))
			for _, k := range []string{"Authorization", "Api-Key"} {
				assert.NotContains(t, h.Get(k), "caller", "the caller's credential is removed")
			}
			assert.Equal(t, "x", h.Get("Openai-Beta"))
		})
	}
}

func responsesStream(t *testing.T, body string) llmclient.ProviderStream {
	t.Helper()
	resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(body))}
	return mustNew(t).NewStream(openai.ShapeResponses, resp)
}

func sseEvent(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }

func TestDialectResponsesStream(t *testing.T) {
	body := ": keep-alive\n\n" +
		sseEvent("response.created", `{"type":"response.created","response":{"id":"r1","model":"o4-mini","status":"in_progress"}}`) +
		sseEvent("response.output_item.added", `{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","call_id":"c1","name":"f"}}`) +
		sseEvent("response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","output_index":0,"delta":"{}"}`) +
		sseEvent("response.reasoning_summary_text.delta", `{"type":"response.reasoning_summary_text.delta","delta":"thinking"}`) +
		sseEvent("response.output_text.delta", `{"type":"response.output_text.delta","delta":"Hi"}`) +
		sseEvent("response.refusal.delta", `{"type":"response.refusal.delta","delta":"no"}`) +
		sseEvent("response.output_text.done", `{"type":"response.output_text.done","text":"Hi"}`) +
		sseEvent("response.completed", `{"type":"response.completed","response":{"id":"r1","model":"o4-mini","status":"completed","usage":{"input_tokens":7,"output_tokens":3,"total_tokens":10,"input_tokens_details":{"cached_tokens":2},"output_tokens_details":{"reasoning_tokens":1}}}}`)
	s := responsesStream(t, body)
	defer s.Close()
	var got []llmclient.Chunk
	for {
		c, err := s.Recv()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		got = append(got, c)
	}
	require.Len(t, got, 9)
	assert.True(t, got[0].KeepAlive)
	assert.False(t, got[1].HasContent(), "created is activity, not content")
	assert.Equal(t, "f", got[2].ToolCalls[0].Name)
	assert.Equal(t, "{}", got[3].ToolCalls[0].Arguments)
	assert.Equal(t, "thinking", got[4].Reasoning)
	assert.Equal(t, "Hi", got[5].Text)
	assert.Equal(t, "no", got[6].Refusal)
	assert.False(t, got[7].HasContent())
	require.NotNil(t, got[8].Usage)
	assert.Equal(t, llmclient.Usage{InputTokens: 7, OutputTokens: 3, TotalTokens: 10, CachedInputTokens: 2, ReasoningTokens: 1}, *got[8].Usage)
	assert.Equal(t, finish.ToolCalls, got[8].FinishReason, "a completed response that calls functions")
	_, err := s.Recv()
	assert.Equal(t, io.EOF, err, "sticky")
}

func TestDialectResponsesStreamErrors(t *testing.T) {
	created := sseEvent("response.created", `{"type":"response.created","response":{"id":"r1"}}`)
	tests := []struct {
		name  string
		body  string
		class failure.Class
		eof   bool
	}{
		{"error event", created + sseEvent("error", `{"type":"error","code":"rate_limit_exceeded","message":"Rate limit reached","param":null}`), failure.RateLimited, false},
		{"nested error event", created + sseEvent("error", `{"type":"error","error":{"type":"insufficient_quota","code":"insufficient_quota","message":"quota"}}`), failure.QuotaExhausted, false},
		{"response.failed", created + sseEvent("response.failed", `{"type":"response.failed","response":{"id":"r1","status":"failed","error":{"code":"server_error","message":"boom"}}}`), failure.ServerError, false},
		{"response.failed without error", created + sseEvent("response.failed", `{"type":"response.failed","response":{"id":"r1","status":"failed","error":null}}`), failure.ServerError, false},
		{"malformed", "data: {nope\n\n" + created, failure.ServerError, false},
		{"malformed, skipped, hides the end", created + "data: {nope\n\n", failure.None, true},
		{"cut", created + sseEvent("response.output_text.delta", `{"type":"response.output_text.delta","delta":"Hi"}`), failure.None, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := responsesStream(t, tt.body)
			defer s.Close()
			var err error
			for err == nil {
				_, err = s.Recv()
			}
			if tt.eof {
				assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
				return
			}
			var e *llmclient.Error
			require.True(t, errors.As(err, &e), "got %v", err)
			assert.Equal(t, tt.class, e.Class)
			_, again := s.Recv()
			assert.Equal(t, err, again, "sticky")
		})
	}
}

func TestDialectResponsesStreamIncomplete(t *testing.T) {
	s := responsesStream(t, sseEvent("response.incomplete", `{"type":"response.incomplete","response":{"id":"r1","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}}`))
	c, err := s.Recv()
	require.NoError(t, err)
	assert.Equal(t, finish.Length, c.FinishReason)
	assert.Equal(t, "max_output_tokens", c.RawFinishReason)
	_, err = s.Recv()
	assert.Equal(t, io.EOF, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
}

func FuzzDialectInspect(f *testing.F) {
	p := mustNew(f)
	f.Add("/chat/completions", []byte(`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`))
	f.Add("/responses", []byte(`{"model":"o4-mini","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}],"tools":[{"type":"function","name":"f"}]}`))
	f.Add("/embeddings", []byte(`{"model":"m","input":[[1,2],[3]]}`))
	f.Add("/openai/deployments/d/chat/completions", []byte(`{"messages":null}`))
	f.Add("/chat/completions", []byte(`{"model":1,"max_tokens":"x","messages":{}}`))
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		call, ok := p.Inspect("POST", path, body)
		requireInspectCallAgrees(t, p, "POST", path, body, call, ok)
		if !ok {
			return
		}
		if call.Shape == "" || call.TokenIDs < 0 {
			t.Fatalf("bad call %+v", call)
		}
		_ = llmclient.EstimatePromptTokens(nil, &call.Request)
	})
}

func FuzzDialectResponsesStream(f *testing.F) {
	f.Add(sseEvent("response.output_text.delta", `{"type":"response.output_text.delta","delta":"Hi"}`) + sseEvent("response.completed", `{"type":"response.completed","response":{"usage":{"input_tokens":1}}}`))
	f.Add(sseEvent("error", `{"type":"error","code":"x","message":"y"}`))
	f.Add(sseEvent("response.failed", `{"type":"response.failed","response":{"error":{"code":"server_error"}}}`))
	f.Add(": ping\n\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"type\":\"function_call\"}}\n\n")
	f.Fuzz(func(t *testing.T, body string) {
		resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}
		s := mustNew(t).NewStream(openai.ShapeResponses, resp)
		defer s.Close()
		for range 10000 {
			if _, err := s.Recv(); err != nil {
				_, again := s.Recv()
				if again != err {
					t.Fatalf("error not sticky: %v then %v", err, again)
				}
				return
			}
		}
		t.Fatal("no end after 10000 events")
	})
}

// requireInspectCallAgrees: InspectCall, writing into arrays that hold another call's
// messages, reads what Inspect read (want, ok), and leaves the call zero when ok is false.
func requireInspectCallAgrees(t *testing.T, p *openai.Provider, method, path string, body []byte, want llmclient.APICall, ok bool) {
	t.Helper()
	var msgs [4]llmclient.Message
	var parts [4]llmclient.Part
	for i := range msgs {
		parts[i] = llmclient.Part{Type: llmclient.PartImage, Text: "stale", Detail: "high", ImageURL: "u"}
		msgs[i] = llmclient.Message{Role: llmclient.RoleTool, Name: "stale", ToolCallID: "c", Content: parts[i : i+1],
			ToolCalls: []llmclient.ToolCall{{ID: "x"}}}
	}
	var got llmclient.APICall
	gotOK := p.InspectCall(method, path, body, &got, msgs[:0], parts[:0])
	require.Equal(t, ok, gotOK, "InspectCall's answer for %s %s", method, path)
	require.Equal(t, want, got, "InspectCall's call for %s %s %q", method, path, body)
}

// InspectCall reads every request as Inspect does, whatever the arrays it is given hold;
// a short Chat Completions conversation is written into them.
func TestInspectCallAgreesWithInspect(t *testing.T) {
	p := mustNew(t)
	az := mustNew(t, openai.WithAzure("https://res.openai.azure.com", "2024-10-21"))
	chat := `{"model":"gpt-4o","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"max_tokens":9}`
	long := `{"model":"m","messages":[` + strings.Repeat(`{"role":"user","content":"x"},`, 6) + `{"role":"assistant","content":"y"}]}`
	cases := []struct {
		p            *openai.Provider
		method, path string
		body         string
	}{
		{p, "POST", "/chat/completions", chat},
		{p, "POST", "/chat/completions", long},
		{p, "POST", "/chat/completions", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u","detail":"low"}}]}]}`},
		{p, "POST", "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":7}]}`}, // the scanner gives up half-way
		{p, "POST", "/chat/completions", `{"model":"m","messages":[]}`},
		{p, "POST", "/chat/completions", ``},
		{p, "POST", "/responses", `{"model":"o4-mini","instructions":"be brief","input":"hi","max_output_tokens":5}`},
		{p, "POST", "/embeddings", `{"model":"e","input":["a","b"]}`},
		{az, "POST", "/openai/deployments/dep/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`},
		{p, "GET", "/chat/completions", chat},
		{p, "POST", "/models", `{}`},
	}
	for _, c := range cases {
		want, ok := c.p.Inspect(c.method, c.path, []byte(c.body))
		requireInspectCallAgrees(t, c.p, c.method, c.path, []byte(c.body), want, ok)
	}

	var msgs [4]llmclient.Message
	var parts [4]llmclient.Part
	var call llmclient.APICall
	require.True(t, p.InspectCall("POST", "/chat/completions", []byte(chat), &call, msgs[:0], parts[:0]))
	require.Len(t, call.Request.Messages, 2)
	assert.Same(t, &msgs[0], &call.Request.Messages[0], "the first messages are written into msgs")
	assert.Same(t, &parts[1], &call.Request.Messages[1].Content[0], "their one-part contents into parts")
}
