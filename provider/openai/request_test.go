package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/format"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/openai"
	"github.com/llmclient/llmclient/ratelimit"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const okBody = `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}`

// pngHeader is enough of a PNG for content sniffing.
var pngHeader = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")

func TestRequestGolden(t *testing.T) {
	weather := json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)
	tests := []struct {
		name   string
		opts   []openai.Option
		req    *llmclient.Request
		stream bool
	}{
		{
			name: "plain",
			req: &llmclient.Request{
				Model: "gpt-4o",
				Messages: []llmclient.Message{
					llmclient.SystemMessage("You are terse."),
					llmclient.UserMessage("Say <hi> & bye"),
				},
			},
		},
		{
			name: "prompt_cache_key",
			req: &llmclient.Request{
				Model:          "gpt-4o",
				Messages:       []llmclient.Message{llmclient.SystemMessage("A long shared preamble."), llmclient.UserMessage("Hello")},
				PromptCacheKey: "tenant-42/support-v3",
			},
		},
		{
			name: "plain_max_completion_tokens",
			opts: []openai.Option{openai.WithMaxTokensField(openai.FieldMaxCompletionTokens)},
			req: &llmclient.Request{
				Model:       "gpt-4o",
				Messages:    []llmclient.Message{llmclient.UserMessage("Hello")},
				MaxTokens:   256,
				Temperature: llmclient.Float(0),
				TopP:        llmclient.Float(0.9),
				Stop:        []string{"\n\n", "END"},
			},
		},
		{
			name: "multipart_images",
			req: &llmclient.Request{
				Model: "gpt-4o",
				Messages: []llmclient.Message{{
					Role: llmclient.RoleUser,
					Name: "alice",
					Content: []llmclient.Part{
						llmclient.TextPart("What is in these images?"),
						{Type: llmclient.PartImage, ImageURL: "https://example.com/cat.jpg", Detail: "low"},
						llmclient.ImageDataPart("image/webp", []byte("RIFF\x00\x00\x00\x00WEBP")),
						{Type: llmclient.PartImage, ImageData: pngHeader, Detail: "high"},
					},
				}},
				MaxTokens: 300,
			},
		},
		{
			name: "tools_and_results",
			req: &llmclient.Request{
				Model: "gpt-4o-mini",
				Messages: []llmclient.Message{
					llmclient.SystemMessage("Use tools."),
					llmclient.UserMessage("Weather in Paris and Rome?"),
					{Role: llmclient.RoleAssistant, ToolCalls: []llmclient.ToolCall{
						{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`},
						{ID: "call_2", Name: "get_weather", Arguments: `{"city":"Rome"}`},
						{ID: "call_3", Name: "get_time"},
					}},
					llmclient.ToolResultMessage("call_1", `{"temp_c":18}`),
					llmclient.ToolResultMessage("call_2", `{"temp_c":24}`),
					llmclient.ToolResultMessage("call_3", "12:00"),
					{Role: llmclient.RoleAssistant, Content: []llmclient.Part{llmclient.TextPart("Paris 18°C, Rome 24°C.")}},
				},
				Tools: []llmclient.Tool{
					{Name: "get_weather", Description: "Current weather for a city", Parameters: weather, Strict: true},
					{Name: "get_time"},
				},
				ToolChoice: &llmclient.ToolChoice{Mode: llmclient.ToolChoiceTool, Name: "get_weather"},
			},
		},
		{
			name: "tool_choice_required",
			req: &llmclient.Request{
				Model:      "gpt-4o",
				Messages:   []llmclient.Message{llmclient.UserMessage("Go")},
				Tools:      []llmclient.Tool{{Name: "noop", Description: "Does nothing"}},
				ToolChoice: &llmclient.ToolChoice{Mode: llmclient.ToolChoiceRequired},
			},
		},
		{
			name: "json_schema",
			req: &llmclient.Request{
				Model:    "gpt-4o",
				Messages: []llmclient.Message{llmclient.UserMessage("Extract: Ann is 31.")},
				ResponseFormat: &llmclient.ResponseFormat{
					Type:   format.JSONSchema,
					Name:   "person",
					Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false}`),
					Strict: true,
				},
				MaxTokens: 100,
			},
		},
		{
			name: "json_object",
			req: &llmclient.Request{
				Model:          "deepseek-chat",
				Messages:       []llmclient.Message{llmclient.UserMessage("Reply in JSON.")},
				ResponseFormat: &llmclient.ResponseFormat{Type: format.JSONObject},
			},
		},
		{
			name: "extra_fields",
			req: &llmclient.Request{
				Model:       "gpt-4o",
				Messages:    []llmclient.Message{llmclient.UserMessage("Hello")},
				Temperature: llmclient.Float(0.7),
				MaxTokens:   50,
				Metadata:    map[string]string{"tenant": "acme", "secret-ish": "never sent"},
				Priority:    ratelimit.Batch,
				Extra: map[string]any{
					"temperature":         0.2, // overrides the adapter's field
					"seed":                42,
					"parallel_tool_calls": false,
					"reasoning_effort":    "low",
					"stream":              true, // ignored: the adapter owns stream
					"enable_thinking":     false,
					"logit_bias":          map[string]int{"50256": -100},
				},
			},
		},
		{
			name:   "stream",
			stream: true,
			req: &llmclient.Request{
				Model:    "gpt-4o",
				Messages: []llmclient.Message{llmclient.UserMessage("Count to 3")},
			},
		},
		{
			name:   "stream_without_usage",
			stream: true,
			opts:   []openai.Option{openai.WithStreamUsage(false)},
			req: &llmclient.Request{
				Model:    "qwen-plus",
				Messages: []llmclient.Message{llmclient.UserMessage("Count to 3")},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := reply{Body: okBody}
			if tt.stream {
				rep = reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: "data: " + okBody + "\n\ndata: [DONE]\n\n"}
			}
			u := newUpstream(t, rep)
			p := newProvider(t, u, tt.opts...)
			call := &llmclient.Call{Model: tt.req.Model, Request: tt.req}
			if tt.stream {
				s, err := p.Stream(context.Background(), call)
				if err != nil {
					t.Fatal(err)
				}
				for {
					if _, err := s.Recv(); err != nil {
						if err != io.EOF {
							t.Fatal(err)
						}
						break
					}
				}
				s.Close()
			} else if _, err := p.Complete(context.Background(), call); err != nil {
				t.Fatal(err)
			}
			got := u.Last(t).Body
			if !json.Valid(got) {
				t.Fatalf("body is not JSON: %s", got)
			}
			golden := filepath.Join("testdata", "request_"+tt.name+".json")
			if *update {
				if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != strings.TrimSuffix(string(want), "\n") {
				t.Fatalf("body differs from %s\n got: %s\nwant: %s", golden, got, want)
			}
		})
	}
}

func TestRequestDeterministic(t *testing.T) {
	u := newUpstream(t, reply{Body: okBody})
	p := newProvider(t, u)
	req := &llmclient.Request{
		Model:    "m",
		Messages: []llmclient.Message{llmclient.UserMessage("x")},
		Extra:    map[string]any{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6},
	}
	var first []byte
	for i := 0; i < 20; i++ {
		if _, err := p.Complete(context.Background(), &llmclient.Call{Model: "m", Request: req}); err != nil {
			t.Fatal(err)
		}
		got := u.Last(t).Body
		if first == nil {
			first = got
		} else if !bytes.Equal(first, got) {
			t.Fatalf("body changed between calls:\n%s\n%s", first, got)
		}
	}
}

func TestRequestNotModified(t *testing.T) {
	u := newUpstream(t, reply{Body: okBody})
	p := newProvider(t, u)
	req := &llmclient.Request{
		Model: "m",
		Messages: []llmclient.Message{{Role: llmclient.RoleAssistant, ToolCalls: []llmclient.ToolCall{{ID: "c", Name: "f"}}},
			llmclient.ToolResultMessage("c", "ok")},
		Extra: map[string]any{"seed": 1},
	}
	if _, err := p.Complete(context.Background(), &llmclient.Call{Model: "m", Request: req}); err != nil {
		t.Fatal(err)
	}
	if req.Messages[0].ToolCalls[0].Arguments != "" || len(req.Extra) != 1 {
		t.Fatal("the adapter modified the caller's request")
	}
}

func TestRequestValidation(t *testing.T) {
	tests := []struct {
		name string
		req  *llmclient.Request
		want string
	}{
		{"no messages", &llmclient.Request{Model: "m"}, "no messages"},
		{"empty role", &llmclient.Request{Model: "m", Messages: []llmclient.Message{{Content: []llmclient.Part{llmclient.TextPart("x")}}}}, "message 0: role is empty"},
		{"tool result without id", &llmclient.Request{Model: "m", Messages: []llmclient.Message{{Role: llmclient.RoleTool, Content: []llmclient.Part{llmclient.TextPart("x")}}}}, "ToolCallID"},
		{"image without data", &llmclient.Request{Model: "m", Messages: []llmclient.Message{{Role: llmclient.RoleUser, Content: []llmclient.Part{llmclient.TextPart("a"), {Type: llmclient.PartImage}}}}}, "part 1: image part has neither"},
		{"unknown part", &llmclient.Request{Model: "m", Messages: []llmclient.Message{{Role: llmclient.RoleUser, Content: []llmclient.Part{{Type: 9}}}}}, "unknown part type"},
		{"unnamed tool", &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("x")}, Tools: []llmclient.Tool{{}}}, "tool 0: name is empty"},
		{"bad parameters", &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("x")}, Tools: []llmclient.Tool{{Name: "t", Parameters: json.RawMessage(`{nope`)}}}, "encoding request"},
		{"tool choice without name", &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("x")}, ToolChoice: &llmclient.ToolChoice{Mode: llmclient.ToolChoiceTool}}, "needs a tool name"},
		{"unknown tool choice", &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("x")}, ToolChoice: &llmclient.ToolChoice{Mode: "any"}}, "unknown tool choice"},
		{"schema missing", &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("x")}, ResponseFormat: &llmclient.ResponseFormat{Type: format.JSONSchema}}, "needs a Schema"},
		{"unknown format", &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("x")}, ResponseFormat: &llmclient.ResponseFormat{Type: "yaml"}}, "unknown response format"},
		{"negative max tokens", &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("x")}, MaxTokens: -1}, "negative"},
		{"bad extra", &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("x")}, Extra: map[string]any{"f": func() {}}}, `Extra["f"]`},
	}
	u := newUpstream(t, reply{Body: okBody})
	p := newProvider(t, u)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := providertest.CompleteError(t, p, &llmclient.Call{Model: "m", Request: tt.req})
			if e.Class != failure.BadRequest || !strings.Contains(e.Message, tt.want) || !strings.HasPrefix(e.Message, "openai: ") {
				t.Fatalf("got %v (class %v); want bad_request containing %q", e, e.Class, tt.want)
			}
		})
	}
	if n := u.Len(); n != 0 {
		t.Fatalf("invalid requests reached the server: %d", n)
	}
}

// roundTripFunc lets a test see requests to real vendor hosts without any network.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func capture(t *testing.T, opts ...openai.Option) *http.Request {
	t.Helper()
	var seen *http.Request
	var body []byte
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		seen = r
		body, _ = io.ReadAll(r.Body)
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(okBody)), Request: r}, nil
	})}
	p, err := openai.New(append([]openai.Option{openai.WithHTTPClient(client)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	req := &llmclient.Request{Model: "gpt-4o", Messages: []llmclient.Message{llmclient.UserMessage("x")}, MaxTokens: 10}
	if _, err := p.Complete(context.Background(), &llmclient.Call{Model: "gpt-4o", Request: req}); err != nil {
		t.Fatal(err)
	}
	seen.Body = io.NopCloser(bytes.NewReader(body))
	return seen
}

func TestMaxTokensFieldDefault(t *testing.T) {
	tests := []struct {
		name  string
		opts  []openai.Option
		field string
	}{
		{"openai default", nil, "max_completion_tokens"},
		{"openai regional", []openai.Option{openai.WithBaseURL("https://eu.api.openai.com/v1")}, "max_completion_tokens"},
		{"azure", []openai.Option{openai.WithAzure("https://res.openai.azure.com", "2024-10-21")}, "max_completion_tokens"},
		{"deepseek", []openai.Option{openai.WithBaseURL("https://api.deepseek.com/v1")}, "max_tokens"},
		{"dashscope", []openai.Option{openai.WithBaseURL("https://dashscope.aliyuncs.com/compatible-mode/v1")}, "max_tokens"},
		{"lookalike host", []openai.Option{openai.WithBaseURL("https://api.openai.com.evil.example/v1")}, "max_tokens"},
		{"explicit override", []openai.Option{openai.WithBaseURL("https://api.groq.com/openai/v1"), openai.WithMaxTokensField(openai.FieldMaxCompletionTokens)}, "max_completion_tokens"},
		{"explicit on openai", []openai.Option{openai.WithMaxTokensField(openai.FieldMaxTokens)}, "max_tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := capture(t, tt.opts...)
			var body map[string]any
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if body[tt.field] != float64(10) {
				t.Fatalf("body %v lacks %s=10", body, tt.field)
			}
			other := "max_tokens"
			if tt.field == other {
				other = "max_completion_tokens"
			}
			if _, ok := body[other]; ok {
				t.Fatalf("body %v has both fields", body)
			}
		})
	}
}
