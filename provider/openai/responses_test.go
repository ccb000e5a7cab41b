package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/format"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/openai"
)

// respOK is a Responses API body in the documented shape: a reasoning item with a
// summary, a message and a function call, usage with cached and reasoning tokens.
const respOK = `{"id":"resp_67cb","object":"response","created_at":1741290958,"status":"completed","error":null,"incomplete_details":null,
"model":"o4-mini-2025-04-16","output":[
 {"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Looking up the weather."}]},
 {"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Checking Paris.","annotations":[]}]},
 {"type":"function_call","id":"fc_1","call_id":"call_abc","name":"get_weather","arguments":"{\"city\":\"Paris\"}","status":"completed"}],
"usage":{"input_tokens":120,"input_tokens_details":{"cached_tokens":64},"output_tokens":40,"output_tokens_details":{"reasoning_tokens":25},"total_tokens":160}}`

func responsesProvider(t *testing.T, r reply, opts ...openai.Option) (*openai.Provider, *upstream) {
	t.Helper()
	u := newUpstream(t, r)
	return newProvider(t, u, append([]openai.Option{openai.WithResponsesAPI()}, opts...)...), u
}

func TestResponsesRequestGolden(t *testing.T) {
	weather := json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)
	signed := "call_0__thought__CiQBcsjafDx7c2lnbmF0dXJlIG9mIGEgdGhvdWdodCB0aGF0IGlzIGxvbmc+/w=="
	tests := []struct {
		name   string
		req    *llmclient.Request
		stream bool
		notes  []string
	}{
		{name: "plain", req: &llmclient.Request{Model: "o4-mini", Messages: []llmclient.Message{
			llmclient.SystemMessage("You are terse."), llmclient.UserMessage("Hello")},
			MaxTokens: 256, Extra: map[string]any{"reasoning_effort": "low", "store": false}}},
		{name: "prompt_cache_key", req: &llmclient.Request{Model: "gpt-4.1", Messages: []llmclient.Message{
			llmclient.SystemMessage("A long shared preamble."), llmclient.UserMessage("Hello")},
			PromptCacheKey: "tenant-42/support-v3"}},
		{name: "conversation", stream: true, req: &llmclient.Request{Model: "gpt-4.1",
			Messages: []llmclient.Message{
				llmclient.SystemMessage("Use tools."),
				{Role: llmclient.RoleUser, Content: []llmclient.Part{llmclient.TextPart("Weather here?"), llmclient.ImageURLPart("https://example.com/sky.jpg")}},
				{Role: llmclient.RoleAssistant, Content: []llmclient.Part{llmclient.TextPart("Checking.")}, ToolCalls: []llmclient.ToolCall{
					{ID: signed, Name: "get_weather", Arguments: `{"city":"Paris"}`}, {ID: "call_2", Name: "now"}}},
				{Role: llmclient.RoleTool, ToolCallID: signed, Content: []llmclient.Part{llmclient.TextPart("18C"), llmclient.ImageDataPart("image/png", pngHeader)}},
				llmclient.ToolResultMessage("call_2", "12:00"),
				{Role: llmclient.RoleSystem, Content: []llmclient.Part{llmclient.TextPart("Answer in French."), llmclient.ImageURLPart("https://example.com/flag.png")}},
			},
			Tools:          []llmclient.Tool{{Name: "get_weather", Description: "Weather", Parameters: weather, Strict: true}, {Name: "now"}},
			ToolChoice:     &llmclient.ToolChoice{Mode: llmclient.ToolChoiceTool, Name: "get_weather"},
			ResponseFormat: &llmclient.ResponseFormat{Type: format.JSONSchema, Name: "w", Schema: weather, Strict: true},
			Temperature:    llmclient.Float(3), TopP: llmclient.Float(0.5)},
			notes: []string{
				"openai: temperature 3 lowered to the maximum 2",
				`openai: tool call id "` + signed + `" sent as "lch_8f9b2f33cba7e2c3d5cc7f2dd38e2d09e4c6b2b7e9bfd03a4e09bbf4e8f1" (the Responses API takes call ids of at most 64 characters)`,
				"openai: message 5: 1 image(s) of a system message moved to a user message (system messages take text only)",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := reply{Body: respOK}
			if tt.stream {
				r = reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: sseEvent("response.completed", `{"type":"response.completed","response":{"id":"r","status":"completed"}}`)}
			}
			p, u := responsesProvider(t, r)
			call := &llmclient.Call{Model: tt.req.Model, Request: tt.req}
			providertest.Exchange(t, p, call, tt.stream)
			got := u.Last(t)
			if got.Path != "/v1/responses" {
				t.Errorf("path %s, want /v1/responses", got.Path)
			}
			providertest.Golden(t, "responses_"+tt.name+".json", got.Body, *update)
			if tt.notes != nil && !*update {
				providertest.EqualLines(t, fixHash(call.Notes), fixHash(tt.notes))
			}
		})
	}
}

// fixHash blanks the hex of shortened ids, which the golden file pins down.
func fixHash(notes []string) []string {
	out := make([]string, len(notes))
	for i, n := range notes {
		if j := strings.Index(n, `"lch_`); j >= 0 {
			if k := strings.Index(n[j+1:], `"`); k >= 0 {
				n = n[:j] + `"lch_…"` + n[j+1+k+1:]
			}
		}
		out[i] = n
	}
	return out
}

func TestResponsesRefusals(t *testing.T) {
	p, u := responsesProvider(t, reply{Body: respOK})
	for name, req := range map[string]*llmclient.Request{
		"stop sequences":  {Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("x")}, Stop: []string{"END"}},
		"assistant image": {Model: "m", Messages: []llmclient.Message{{Role: llmclient.RoleAssistant, Content: []llmclient.Part{llmclient.ImageURLPart("https://x/y.png")}}}},
	} {
		_, err := p.Complete(context.Background(), &llmclient.Call{Model: "m", Request: req})
		if !errors.Is(err, llmclient.ErrUnsupported) || llmclient.ClassOf(err) != failure.BadRequest {
			t.Errorf("%s: err = %v, want a refusal wrapping ErrUnsupported", name, err)
		}
	}
	_, err := p.Complete(context.Background(), &llmclient.Call{Model: "m", Request: &llmclient.Request{Model: "m", Messages: []llmclient.Message{{Content: []llmclient.Part{llmclient.TextPart("x")}}}}})
	if llmclient.ClassOf(err) != failure.BadRequest || errors.Is(err, llmclient.ErrUnsupported) {
		t.Errorf("empty role: %v, want a plain bad request", err)
	}
	for _, n := range []int{65, 1 << 16} { // prompt_cache_key's maxLength is 64 characters
		req := &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("x")}, PromptCacheKey: strings.Repeat("é", n)}
		_, err = p.Complete(context.Background(), &llmclient.Call{Model: "m", Request: req})
		if llmclient.ClassOf(err) != failure.BadRequest || !strings.Contains(err.Error(), "PromptCacheKey") {
			t.Errorf("a %d-character PromptCacheKey: %v, want a bad request naming it", n, err)
		}
	}
	if u.Len() != 0 {
		t.Errorf("%d refused requests reached the server", u.Len())
	}
}

// A PromptCacheKey of 64 characters, multi-byte ones included, is sent as it is.
func TestResponsesPromptCacheKeyAtItsLimit(t *testing.T) {
	p, u := responsesProvider(t, reply{Body: respOK})
	key := strings.Repeat("é", 64)
	req := &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("x")}, PromptCacheKey: key}
	if _, err := p.Complete(context.Background(), &llmclient.Call{Model: "m", Request: req}); err != nil {
		t.Fatal(err)
	}
	if u.Len() != 1 || !strings.Contains(string(u.Last(t).Body), `"prompt_cache_key":"`+key+`"`) {
		t.Errorf("the key did not reach the server as it is")
	}
}

func TestResponsesComplete(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		text   string
		finish finish.Reason
		raw    string
		calls  int
		class  failure.Class
	}{
		{name: "tool calls", body: respOK, text: "Checking Paris.", finish: finish.ToolCalls, raw: "completed", calls: 1},
		{name: "max tokens", body: `{"id":"r","model":"m","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[{"type":"message","content":[{"type":"output_text","text":"Hal"}]}]}`,
			text: "Hal", finish: finish.Length, raw: "max_output_tokens"},
		{name: "content filter", body: `{"id":"r","model":"m","status":"incomplete","incomplete_details":{"reason":"content_filter"},"output":[]}`,
			finish: finish.ContentFilter, raw: "content_filter"},
		{name: "refusal", body: `{"id":"r","model":"m","status":"completed","output":[{"type":"message","content":[{"type":"refusal","refusal":"I can't help with that."}]}]}`,
			finish: finish.Refusal, raw: "completed"},
		{name: "failed", body: `{"id":"r","model":"m","status":"failed","error":{"code":"rate_limit_exceeded","message":"Rate limit reached. Please try again in 1.5s."},"output":[]}`,
			class: failure.RateLimited},
		{name: "failed without error", body: `{"id":"r","model":"m","status":"failed","error":null,"output":[]}`, class: failure.ServerError},
		{name: "error body", body: `{"error":{"message":"boom","type":"server_error","code":null}}`, class: failure.ServerError},
		{name: "garbage", body: `<html>bad gateway</html>`, class: failure.ServerError},
		{name: "empty object", body: `{}`, class: failure.ServerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := responsesProvider(t, reply{Body: tt.body}, openai.WithAPIKey("sk-resp-secret"))
			resp, err := p.Complete(context.Background(), simpleCall("o4-mini"))
			if tt.class != failure.None {
				e := providertest.AsError(t, err)
				if e.Class != tt.class || e.Status != 200 || strings.Contains(e.Error(), "sk-resp-secret") {
					t.Errorf("error %+v", e)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != tt.text || resp.FinishReason != tt.finish || resp.RawFinishReason != tt.raw || len(resp.ToolCalls) != tt.calls {
				t.Errorf("response %+v", resp)
			}
		})
	}
	p, _ := responsesProvider(t, reply{Body: respOK})
	resp := providertest.Complete(t, p, simpleCall("o4-mini"))
	want := llmclient.Usage{InputTokens: 120, OutputTokens: 40, TotalTokens: 160, CachedInputTokens: 64, ReasoningTokens: 25}
	if resp.ID != "resp_67cb" || resp.Model != "o4-mini-2025-04-16" || resp.Reasoning != "Looking up the weather." || resp.Usage != want ||
		resp.ToolCalls[0] != (llmclient.ToolCall{ID: "call_abc", Name: "get_weather", Arguments: `{"city":"Paris"}`}) {
		t.Errorf("response %+v", resp)
	}
}

// respStream is a Responses API event stream in the documented shape.
var respStream = sseEvent("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","model":"o4-mini","status":"in_progress","output":[]}}`) +
	": keep-alive\n\n" +
	sseEvent("response.output_item.added", `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"reasoning","id":"rs_1","summary":[]}}`) +
	sseEvent("response.reasoning_summary_text.delta", `{"type":"response.reasoning_summary_text.delta","sequence_number":2,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"Weather?"}`) +
	sseEvent("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"Let me "}`) +
	sseEvent("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"check."}`) +
	sseEvent("response.audio.delta", `{"type":"response.audio.delta","sequence_number":5,"delta":"AAAA"}`) +
	sseEvent("response.output_item.added", `{"type":"response.output_item.added","sequence_number":6,"output_index":2,"item":{"type":"function_call","id":"fc_1","call_id":"call_abc","name":"get_weather","arguments":""}}`) +
	sseEvent("response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","sequence_number":7,"item_id":"fc_1","output_index":2,"delta":"{\"city\":"}`) +
	sseEvent("response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","sequence_number":8,"item_id":"fc_1","output_index":2,"delta":"\"Paris\"}"}`) +
	sseEvent("response.completed", `{"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","model":"o4-mini","status":"completed","usage":{"input_tokens":50,"input_tokens_details":{"cached_tokens":0},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":8},"total_tokens":70}}}`)

func TestResponsesStream(t *testing.T) {
	p, _ := responsesProvider(t, reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: respStream})
	st, err := p.Stream(context.Background(), simpleCall("o4-mini"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := providertest.Drain(st)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	providertest.EqualLines(t, got, []string{
		"id=resp_1 model=o4-mini",
		"keep-alive",
		"",
		`reasoning="Weather?"`,
		`text="Let me "`,
		`text="check."`,
		"", // audio is not text
		"tool[2]=call_abc,get_weather,",
		`tool[2]=,,{"city":`,
		`tool[2]=,,"Paris"}`,
		"id=resp_1 model=o4-mini finish=tool_calls(completed) usage=in:50,out:20,total:70,cached:0,reasoning:8",
	})
}

func TestResponsesStreamErrors(t *testing.T) {
	created := sseEvent("response.created", `{"type":"response.created","response":{"id":"r1","model":"m"}}`)
	text := sseEvent("response.output_text.delta", `{"type":"response.output_text.delta","delta":"Hi"}`)
	tests := []struct {
		name  string
		body  string
		class failure.Class
		cut   bool
	}{
		{"quota error event before content", created + sseEvent("error", `{"type":"error","code":"insufficient_quota","message":"You exceeded your current quota, key sk-resp-secret","param":null,"sequence_number":1}`), failure.QuotaExhausted, false},
		{"rate limit error event", created + text + sseEvent("error", `{"type":"error","code":"rate_limit_exceeded","message":"slow down","param":null}`), failure.RateLimited, false},
		{"nested error event", created + sseEvent("error", `{"type":"error","error":{"type":"server_error","code":"server_error","message":"boom"}}`), failure.ServerError, false},
		{"failed", created + text + sseEvent("response.failed", `{"type":"response.failed","response":{"id":"r1","status":"failed","error":{"code":"server_error","message":"The model failed."}}}`), failure.ServerError, false},
		{"cut before completed", created + text, failure.Network, true},
		{"incomplete", created + sseEvent("response.incomplete", `{"type":"response.incomplete","response":{"id":"r1","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}}`), failure.None, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := responsesProvider(t, reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: tt.body}, openai.WithAPIKey("sk-resp-secret"))
			st, err := p.Stream(context.Background(), simpleCall("m"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var last llmclient.Chunk
			for {
				c, err := st.Recv()
				if err == io.EOF {
					if tt.class != failure.None {
						t.Fatalf("clean end, want class %v", tt.class)
					}
					if last.FinishReason != finish.Length || last.RawFinishReason != "max_output_tokens" {
						t.Errorf("last chunk %+v", last)
					}
					return
				}
				if err != nil {
					if tt.cut != errors.Is(err, io.ErrUnexpectedEOF) || llmclient.ClassOf(err) != tt.class || strings.Contains(err.Error(), "sk-resp-secret") {
						t.Errorf("err = %v (class %v)", err, llmclient.ClassOf(err))
					}
					return
				}
				last = c
			}
		})
	}
}

func TestResponsesAzureURL(t *testing.T) {
	var seen *http.Request
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		seen = r
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(respOK)), Request: r}, nil
	})}
	p, err := openai.New(openai.WithHTTPClient(client), openai.WithAzure("https://res.openai.azure.com", "2025-04-01-preview"), openai.WithResponsesAPI(), openai.WithAPIKey("k"))
	if err != nil {
		t.Fatal(err)
	}
	providertest.Complete(t, p, simpleCall("my-deployment"))
	if got := seen.URL.String(); got != "https://res.openai.azure.com/openai/responses?api-version=2025-04-01-preview" {
		t.Errorf("URL %s", got)
	}
}

// TestResponsesReasoningText checks that a one-shot Response reports a reasoning item's
// reasoning_text content (what open-weight models served by a Responses API send) as
// Reasoning, with its summary, as a stream reports both.
func TestResponsesReasoningText(t *testing.T) {
	body := `{"id":"r","model":"gpt-oss-120b","status":"completed","output":[
 {"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Sum. "}],"content":[{"type":"reasoning_text","text":"The user greets me."}]},
 {"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hello!"}]}]}`
	p, _ := responsesProvider(t, reply{Body: body})
	resp := providertest.Complete(t, p, simpleCall("gpt-oss-120b"))
	if resp.Reasoning != "Sum. The user greets me." || resp.Text != "Hello!" {
		t.Errorf("reasoning %q, text %q", resp.Reasoning, resp.Text)
	}
}
