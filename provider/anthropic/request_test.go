package anthropic_test

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/format"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/anthropic"
)

// okBody is a minimal Messages response.
const okBody = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`

// TestRequestGolden checks the request bodies the adapter sends against testdata.
func TestRequestGolden(t *testing.T) {
	weather := llmclient.Tool{
		Name:        "get_weather",
		Description: "Current weather for a city.",
		Parameters:  json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}`),
	}
	cases := []struct {
		name   string
		req    llmclient.Request
		stream bool
	}{
		{
			name: "simple.json",
			req: llmclient.Request{
				Messages: []llmclient.Message{
					llmclient.SystemMessage("You are terse."),
					llmclient.UserMessage("Hello"),
				},
				Temperature: llmclient.Float(0.2),
			},
		},
		{
			name: "tool_round_trip.json",
			req: llmclient.Request{
				Messages: []llmclient.Message{
					llmclient.SystemMessage("Use tools."),
					llmclient.SystemMessage("Be brief."),
					llmclient.UserMessage("Weather in Paris and Rome?"),
					{Role: llmclient.RoleAssistant, Content: []llmclient.Part{llmclient.TextPart("Checking both.")}, ToolCalls: []llmclient.ToolCall{
						{ID: "toolu_01", Name: "get_weather", Arguments: `{"city":"Paris"}`},
						{ID: "toolu_02", Name: "get_weather", Arguments: `{"city": "Rome"}`},
					}},
					llmclient.ToolResultMessage("toolu_01", "18C, cloudy"),
					llmclient.ToolResultMessage("toolu_02", "25C, sunny"),
					llmclient.UserMessage("Which is warmer?"),
				},
				Tools:      []llmclient.Tool{weather, {Name: "now", Strict: true}},
				ToolChoice: &llmclient.ToolChoice{Mode: llmclient.ToolChoiceTool, Name: "get_weather"},
				MaxTokens:  512,
			},
		},
		{
			name: "images_and_options.json",
			req: llmclient.Request{
				Messages: []llmclient.Message{{Role: llmclient.RoleUser, Content: []llmclient.Part{
					llmclient.TextPart("Compare these."),
					llmclient.ImageDataPart("image/png", []byte("\x89PNG\r\n\x1a\nfake")),
					llmclient.ImageURLPart("data:image/jpeg;base64,/9j/AAAA"),
					llmclient.ImageURLPart("https://example.com/cat.webp"),
				}}},
				TopP:       llmclient.Float(0.9),
				Stop:       []string{"END", "\n\nHuman:"},
				ToolChoice: &llmclient.ToolChoice{Mode: llmclient.ToolChoiceRequired},
				Tools:      []llmclient.Tool{weather},
			},
		},
		{
			name: "json_schema_extra.json",
			req: llmclient.Request{
				Messages: []llmclient.Message{llmclient.UserMessage("Give me a person.")},
				ResponseFormat: &llmclient.ResponseFormat{
					Type:   format.JSONSchema,
					Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}`),
				},
				Temperature: llmclient.Float(1),
				Extra: map[string]any{
					"output_config": map[string]any{"effort": "low"},
					"metadata":      map[string]any{"user_id": "u-42"},
					"temperature":   nil,
				},
			},
		},
		{
			name:   "stream.json",
			stream: true,
			req: llmclient.Request{
				Messages: []llmclient.Message{
					llmclient.UserMessage("Count to three."),
					llmclient.AssistantMessage("One,"),
				},
				ResponseFormat: &llmclient.ResponseFormat{Type: format.JSONObject},
				ToolChoice:     &llmclient.ToolChoice{Mode: llmclient.ToolChoiceNone},
				Tools:          []llmclient.Tool{weather},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reply := providertest.Fixed(http.StatusOK, okBody)
			if tc.stream {
				reply = providertest.SSE(streamText)
			}
			p, rec := serve(t, reply)
			providertest.Exchange(t, p, &llmclient.Call{Model: "claude-sonnet-4-5", Request: &tc.req}, tc.stream)
			got := rec.Last(t)
			if got.Method != http.MethodPost || got.URI != "/v1/messages" {
				t.Errorf("request %s %s, want POST /v1/messages", got.Method, got.URI)
			}
			providertest.Golden(t, tc.name, got.Body, *update)
		})
	}
}

func TestRequestHeaders(t *testing.T) {
	p, rec := serve(t, providertest.Fixed(http.StatusOK, okBody),
		anthropic.WithHeader("anthropic-beta", "output-128k-2025-02-19"),
		anthropic.WithVersion("2099-01-01"))

	call := providertest.UserCall("claude-x", llmclient.UserMessage("hi"))
	providertest.Complete(t, p, call)
	h := rec.Last(t).Header
	for k, want := range map[string]string{
		"X-Api-Key":         testKey,
		"Anthropic-Version": "2099-01-01",
		"Anthropic-Beta":    "output-128k-2025-02-19",
		"Content-Type":      "application/json",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}

	call.APIKey = "sk-ant-from-pool"
	providertest.Complete(t, p, call)
	if got := rec.Last(t).Header.Get("X-Api-Key"); got != "sk-ant-from-pool" {
		t.Errorf("Call.APIKey not used: x-api-key = %q", got)
	}
}

func TestDefaultMaxTokens(t *testing.T) {
	for _, tc := range []struct {
		opts []anthropic.Option
		req  int
		want int
	}{
		{nil, 0, anthropic.DefaultMaxTokens},
		{[]anthropic.Option{anthropic.WithDefaultMaxTokens(1000)}, 0, 1000},
		{[]anthropic.Option{anthropic.WithDefaultMaxTokens(1000)}, 77, 77},
	} {
		p, rec := serve(t, providertest.Fixed(http.StatusOK, okBody), tc.opts...)
		call := providertest.UserCall("m", llmclient.UserMessage("hi"))
		call.Request.MaxTokens = tc.req
		providertest.Complete(t, p, call)
		var body struct {
			MaxTokens int `json:"max_tokens"`
		}
		if err := json.Unmarshal(rec.Last(t).Body, &body); err != nil {
			t.Fatal(err)
		}
		if body.MaxTokens != tc.want {
			t.Errorf("request MaxTokens %d: sent max_tokens %d, want %d", tc.req, body.MaxTokens, tc.want)
		}
	}
}

// TestRequestInvalid checks that requests the adapter cannot encode fail before any HTTP
// call, as bad_request errors.
func TestRequestInvalid(t *testing.T) {
	cases := map[string]llmclient.Request{
		"tool result without id": {Messages: []llmclient.Message{{Role: llmclient.RoleTool, Content: []llmclient.Part{llmclient.TextPart("x")}}}},
		"bad arguments": {Messages: []llmclient.Message{{Role: llmclient.RoleAssistant, ToolCalls: []llmclient.ToolCall{
			{ID: "t1", Name: "f", Arguments: `{"a":`}}}}},
		"array arguments":     {Messages: []llmclient.Message{{Role: llmclient.RoleAssistant, ToolCalls: []llmclient.ToolCall{{ID: "t1", Name: "f", Arguments: `[1]`}}}}},
		"unknown role":        {Messages: []llmclient.Message{{Role: "narrator", Content: []llmclient.Part{llmclient.TextPart("x")}}}},
		"temperature NaN":     {Temperature: llmclient.Float(math.NaN())},
		"max tokens negative": {MaxTokens: -1},
		"unknown cache TTL":   {Tools: []llmclient.Tool{{Name: "f", Cache: &llmclient.CacheControl{TTL: 2 * time.Hour}}}},
		"unknown message TTL": {Messages: []llmclient.Message{{Role: llmclient.RoleUser, Content: []llmclient.Part{llmclient.TextPart("x")},
			Cache: &llmclient.CacheControl{TTL: 24 * time.Hour}}}},
		"top_p infinite":      {TopP: llmclient.Float(math.Inf(1))},
		"empty image":         {Messages: []llmclient.Message{{Role: llmclient.RoleUser, Content: []llmclient.Part{{Type: llmclient.PartImage}}}}},
		"url-encoded data":    {Messages: []llmclient.Message{{Role: llmclient.RoleUser, Content: []llmclient.Part{llmclient.ImageURLPart("data:image/png,abc")}}}},
		"tool without name":   {Tools: []llmclient.Tool{{Description: "x"}}},
		"tool bad schema":     {Tools: []llmclient.Tool{{Name: "f", Parameters: json.RawMessage(`{`)}}},
		"tool choice no name": {ToolChoice: &llmclient.ToolChoice{Mode: llmclient.ToolChoiceTool}},
		"tool choice unknown": {ToolChoice: &llmclient.ToolChoice{Mode: "sometimes"}},
		"schema missing":      {ResponseFormat: &llmclient.ResponseFormat{Type: format.JSONSchema}},
		"extra unencodable":   {Extra: map[string]any{"x": func() {}}},
	}
	p, rec := serve(t, providertest.Fixed(http.StatusOK, okBody))
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			if len(req.Messages) == 0 {
				req.Messages = []llmclient.Message{llmclient.UserMessage("hi")}
			}
			providertest.CheckBadRequest(t, p, "anthropic", &llmclient.Call{Model: "m", Request: &req})
		})
	}
	if n := rec.Len(); n != 0 {
		t.Errorf("%d invalid requests reached the server", n)
	}
}

func TestNoKey(t *testing.T) {
	p, err := anthropic.New()
	if err != nil {
		t.Fatal(err)
	}
	if e := providertest.CompleteError(t, p, providertest.UserCall("m", llmclient.UserMessage("hi"))); e.Class != failure.Auth {
		t.Fatalf("err = %v, want an auth error", e)
	}
}

func TestNewValidates(t *testing.T) {
	for name, opts := range map[string][]anthropic.Option{
		"nil client":     {anthropic.WithHTTPClient(nil)},
		"bad url":        {anthropic.WithBaseURL("api.anthropic.com")},
		"max tokens":     {anthropic.WithDefaultMaxTokens(0)},
		"empty version":  {anthropic.WithVersion("")},
		"bad version":    {anthropic.WithVersion("2023-06-01\r\nX-Injected: 1")},
		"negative limit": {anthropic.WithDefaultMaxTokens(-5)},
		"url with query": {anthropic.WithBaseURL("https://x.example/?key=secret")},
		"url with user":  {anthropic.WithBaseURL("https://secret@x.example")},
		"bad header":     {anthropic.WithHeader("bad header", "x")},
		"bad value":      {anthropic.WithHeader("X-Ok", "a\nb")},
		"bad key":        {anthropic.WithAPIKey("key\r\n")},
	} {
		_, err := anthropic.New(opts...)
		if err == nil || !strings.HasPrefix(err.Error(), "anthropic: ") {
			t.Errorf("%s: New error = %v, want an anthropic: error", name, err)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error echoes the URL: %v", name, err)
		}
	}
	if _, err := anthropic.New(nil, anthropic.WithBaseURL("http://127.0.0.1:1/")); err != nil {
		t.Errorf("valid options rejected: %v", err)
	}
}
