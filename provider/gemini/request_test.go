package gemini_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/format"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/gemini"
)

// okBody is a minimal GenerateContentResponse.
const okBody = `{"candidates":[{"content":{"parts":[{"text":"ok"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1,"totalTokenCount":2},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`

// TestRequestGolden checks the request bodies the adapter sends against testdata.
func TestRequestGolden(t *testing.T) {
	weather := llmclient.Tool{
		Name:        "get_weather",
		Description: "Current weather for a city.",
		Parameters:  json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}`),
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
				MaxTokens:   256,
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
						{ID: "call_0__thought__CiQBcsjafDx7c2lnbmF0dXJl", Name: "get_weather", Arguments: `{"city":"Paris"}`},
						{ID: "call_1", Name: "get_weather", Arguments: `{"city": "Rome"}`},
					}},
					llmclient.ToolResultMessage("call_0__thought__CiQBcsjafDx7c2lnbmF0dXJl", `{"temp_c": 18, "sky": "cloudy"}`),
					llmclient.ToolResultMessage("call_1", "25C, sunny"),
					llmclient.UserMessage("Which is warmer?"),
				},
				Tools:      []llmclient.Tool{weather, {Name: "now"}},
				ToolChoice: &llmclient.ToolChoice{Mode: llmclient.ToolChoiceTool, Name: "get_weather"},
			},
		},
		{
			name: "foreign_history.json",
			req: llmclient.Request{
				Messages: []llmclient.Message{
					llmclient.UserMessage("What time is it?"),
					{Role: llmclient.RoleAssistant, ToolCalls: []llmclient.ToolCall{{ID: "call_Ab3xYz", Name: "now"}}},
					{Role: llmclient.RoleTool, ToolCallID: "call_Ab3xYz", Content: []llmclient.Part{llmclient.TextPart("12:00")}},
					{Role: llmclient.RoleTool, ToolCallID: "toolu_orphan", Name: "clock", Content: []llmclient.Part{llmclient.TextPart("[1,2]")}},
				},
				Tools:      []llmclient.Tool{{Name: "now", Description: "The time."}},
				ToolChoice: &llmclient.ToolChoice{Mode: llmclient.ToolChoiceRequired},
			},
		},
		{
			name: "images_and_json.json",
			req: llmclient.Request{
				Messages: []llmclient.Message{{Role: llmclient.RoleUser, Content: []llmclient.Part{
					llmclient.TextPart("Compare these."),
					llmclient.ImageDataPart("image/png", []byte("\x89PNG\r\n\x1a\nfake")),
					llmclient.ImageURLPart("data:image/jpeg;base64,/9j/AAAA"),
					llmclient.ImageURLPart("https://generativelanguage.googleapis.com/v1beta/files/abc-123"),
					{Type: llmclient.PartImage, ImageURL: "gs://bucket/cat.webp"},
					llmclient.ImageURLPart("https://example.com/dog.JPG?size=large"),
				}}},
				TopP:           llmclient.Float(0.9),
				Stop:           []string{"END"},
				ResponseFormat: &llmclient.ResponseFormat{Type: format.JSONObject},
				ToolChoice:     &llmclient.ToolChoice{Mode: llmclient.ToolChoiceNone},
				Tools:          []llmclient.Tool{weather},
			},
		},
		{
			name: "json_schema_extra.json",
			req: llmclient.Request{
				Messages: []llmclient.Message{llmclient.UserMessage("Give me a person.")},
				ResponseFormat: &llmclient.ResponseFormat{
					Type:   format.JSONSchema,
					Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
				},
				MaxTokens: 1000,
				Extra: map[string]any{
					"generationConfig": map[string]any{"thinkingConfig": map[string]any{"thinkingBudget": 0}},
					"safetySettings":   []map[string]string{{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}},
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
				ToolChoice: &llmclient.ToolChoice{Mode: llmclient.ToolChoiceAuto},
				Tools:      []llmclient.Tool{weather},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reply := providertest.Fixed(http.StatusOK, okBody)
			wantPath := "/v1beta/models/gemini-2.5-flash:generateContent"
			if tc.stream {
				reply = providertest.SSE(streamText)
				wantPath = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
			}
			p, rec := serve(t, reply)
			providertest.Exchange(t, p, &llmclient.Call{Model: "models/gemini-2.5-flash", Request: &tc.req}, tc.stream)
			got := rec.Last(t)
			if got.Method != http.MethodPost || got.URI != wantPath {
				t.Errorf("request %s %s, want POST %s", got.Method, got.URI, wantPath)
			}
			providertest.Golden(t, tc.name, got.Body, *update)
		})
	}
}

func TestRequestHeaders(t *testing.T) {
	p, rec := serve(t, providertest.Fixed(http.StatusOK, okBody), gemini.WithHeader("x-goog-user-project", "proj-1"))
	call := providertest.UserCall("gemini-2.5-pro", llmclient.UserMessage("hi"))
	providertest.Complete(t, p, call)
	got := rec.Last(t)
	if k := got.Header.Get("X-Goog-Api-Key"); k != testKey {
		t.Errorf("x-goog-api-key = %q", k)
	}
	if got.Header.Get("Authorization") != "" || strings.Contains(got.URI, "key=") {
		t.Errorf("key sent elsewhere: path %q, authorization %q", got.URI, got.Header.Get("Authorization"))
	}
	if got.Header.Get("X-Goog-User-Project") != "proj-1" || got.Header.Get("Content-Type") != "application/json" {
		t.Errorf("headers = %v", got.Header)
	}
	call.APIKey = "AIza-from-pool"
	providertest.Complete(t, p, call)
	if k := rec.Last(t).Header.Get("X-Goog-Api-Key"); k != "AIza-from-pool" {
		t.Errorf("Call.APIKey not used: %q", k)
	}
}

func TestVertex(t *testing.T) {
	p, rec := serve(t, providertest.Fixed(http.StatusOK, okBody), gemini.WithVertex("my-proj", "us-central1"))
	call := providertest.UserCall("gemini-2.5-flash", llmclient.UserMessage("hi"))
	call.APIKey = "ya29.access-token"
	providertest.Complete(t, p, call)
	got := rec.Last(t)
	if want := "/v1/projects/my-proj/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent"; got.URI != want {
		t.Errorf("path = %q, want %q", got.URI, want)
	}
	if a := got.Header.Get("Authorization"); a != "Bearer ya29.access-token" {
		t.Errorf("authorization = %q", a)
	}
	if got.Header.Get("X-Goog-Api-Key") != "" {
		t.Error("x-goog-api-key sent to Vertex AI")
	}
	st, err := p.Stream(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if want := "/v1/projects/my-proj/locations/us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"; rec.Last(t).URI != want {
		t.Errorf("stream path = %q", rec.Last(t).URI)
	}
}

// TestRequestInvalid checks that requests the adapter cannot encode fail before any HTTP
// call, as bad_request errors.
func TestRequestInvalid(t *testing.T) {
	cases := map[string]llmclient.Request{
		"tool result without id":  {Messages: []llmclient.Message{{Role: llmclient.RoleTool, Content: []llmclient.Part{llmclient.TextPart("x")}}}},
		"temperature NaN":         {Temperature: llmclient.Float(math.NaN())},
		"max tokens over int32":   {MaxTokens: math.MaxInt},
		"max tokens negative":     {MaxTokens: -1},
		"topP infinite":           {TopP: llmclient.Float(math.Inf(-1))},
		"bad arguments":           {Messages: []llmclient.Message{{Role: llmclient.RoleAssistant, ToolCalls: []llmclient.ToolCall{{ID: "t1", Name: "f", Arguments: `{"a":`}}}}},
		"call without name":       {Messages: []llmclient.Message{{Role: llmclient.RoleAssistant, ToolCalls: []llmclient.ToolCall{{ID: "t1"}}}}},
		"unknown role":            {Messages: []llmclient.Message{{Role: "narrator", Content: []llmclient.Part{llmclient.TextPart("x")}}}},
		"empty image":             {Messages: []llmclient.Message{{Role: llmclient.RoleUser, Content: []llmclient.Part{{Type: llmclient.PartImage}}}}},
		"url-encoded data":        {Messages: []llmclient.Message{{Role: llmclient.RoleUser, Content: []llmclient.Part{llmclient.ImageURLPart("data:image/png,abc")}}}},
		"tool without name":       {Tools: []llmclient.Tool{{Description: "x"}}},
		"tool bad schema":         {Tools: []llmclient.Tool{{Name: "f", Parameters: json.RawMessage(`{`)}}},
		"tool choice no name":     {ToolChoice: &llmclient.ToolChoice{Mode: llmclient.ToolChoiceTool}},
		"tool choice unknown":     {ToolChoice: &llmclient.ToolChoice{Mode: "sometimes"}},
		"schema missing":          {ResponseFormat: &llmclient.ResponseFormat{Type: format.JSONSchema}},
		"extra unencodable":       {Extra: map[string]any{"x": func() {}}},
		"no model":                {Model: ""},
		"model with only prefix ": {Model: "models/"},
	}
	p, rec := serve(t, providertest.Fixed(http.StatusOK, okBody))
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			if len(req.Messages) == 0 {
				req.Messages = []llmclient.Message{llmclient.UserMessage("hi")}
			}
			model := "m"
			if strings.Contains(name, "model") {
				model = req.Model
			}
			providertest.CheckBadRequest(t, p, "gemini", &llmclient.Call{Model: model, Request: &req})
		})
	}
	if n := rec.Len(); n != 0 {
		t.Errorf("%d invalid requests reached the server", n)
	}
}

func TestNoKey(t *testing.T) {
	p, err := gemini.New()
	if err != nil {
		t.Fatal(err)
	}
	if e := providertest.CompleteError(t, p, providertest.UserCall("m", llmclient.UserMessage("hi"))); e.Class != failure.Auth {
		t.Fatalf("err = %v, want an auth error", e)
	}
}

func TestNewValidates(t *testing.T) {
	for name, opts := range map[string][]gemini.Option{
		"nil client":         {gemini.WithHTTPClient(nil)},
		"bad url":            {gemini.WithBaseURL("generativelanguage.googleapis.com")},
		"url with query":     {gemini.WithBaseURL("https://x.example/?key=secret")},
		"vertex no proj":     {gemini.WithVertex("", "us-central1")},
		"vertex bad loc":     {gemini.WithVertex("p", "us/central1")},
		"bad header name":    {gemini.WithHeader("bad header", "x")},
		"bad header value":   {gemini.WithHeader("X-Ok", "a\nb")},
		"bad key":            {gemini.WithAPIKey("key\r\n")},
		"version with path":  {gemini.WithAPIVersion("v1beta/../../x")},
		"version with query": {gemini.WithAPIVersion("v1?alt=json")},
	} {
		_, err := gemini.New(opts...)
		if err == nil || !strings.HasPrefix(err.Error(), "gemini: ") {
			t.Errorf("%s: New error = %v, want a gemini: error", name, err)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error echoes the URL's query: %v", name, err)
		}
	}
	for _, opts := range [][]gemini.Option{
		{nil, gemini.WithBaseURL("http://127.0.0.1:1/")},
		{gemini.WithVertex("p", "global")},
		{gemini.WithVertex("p", "europe-west4"), gemini.WithAPIVersion("v1beta1")},
	} {
		if _, err := gemini.New(opts...); err != nil {
			t.Errorf("valid options rejected: %v", err)
		}
	}
}
