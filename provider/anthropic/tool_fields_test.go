package anthropic_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/format"
	"github.com/llmclient/llmclient/internal/providertest"
)

// field returns the JSON of the value at path in body ("" when absent), keys and array
// indexes as strings.
func field(t *testing.T, body []byte, path ...string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	for _, k := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i := 0
			for _, c := range k {
				i = i*10 + int(c-'0')
			}
			if i >= len(x) {
				return ""
			}
			v = x[i]
		default:
			return ""
		}
	}
	if v == nil {
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func sendBody(t *testing.T, req llmclient.Request) ([]byte, []string) {
	t.Helper()
	p, rec := serve(t, providertest.Fixed(http.StatusOK, okBody))
	call := &llmclient.Call{Model: "claude-sonnet-4-5", Request: &req}
	providertest.Exchange(t, p, call, false)
	return rec.Last(t).Body, call.Notes
}

// A failed tool call's result is a tool_result with is_error true, its text and image
// blocks (and their cache marks) as the caller gave them; a successful one has no is_error.
func TestToolResultIsErrorAndImages(t *testing.T) {
	body, _ := sendBody(t, llmclient.Request{
		Tools: []llmclient.Tool{{Name: "screenshot"}},
		Messages: []llmclient.Message{
			llmclient.UserMessage("what is on screen?"),
			{Role: llmclient.RoleAssistant, ToolCalls: []llmclient.ToolCall{
				{ID: "toolu_1", Name: "screenshot"}, {ID: "toolu_2", Name: "screenshot"}}},
			{Role: llmclient.RoleTool, ToolCallID: "toolu_1", IsError: true, Content: []llmclient.Part{
				{Type: llmclient.PartText, Text: "partial:", Cache: &llmclient.CacheControl{}},
				llmclient.ImageDataPart("image/png", []byte("\x89PNG")),
			}},
			llmclient.ToolResultMessage("toolu_2", "ok"),
		},
	})
	want := `{"content":[{"cache_control":{"type":"ephemeral"},"text":"partial:","type":"text"},` +
		`{"source":{"data":"iVBORw==","media_type":"image/png","type":"base64"},"type":"image"}],` +
		`"is_error":true,"tool_use_id":"toolu_1","type":"tool_result"}`
	if got := field(t, body, "messages", "2", "content", "0"); got != want {
		t.Errorf("failed tool result\n got %s\nwant %s", got, want)
	}
	if got := field(t, body, "messages", "2", "content", "1"); got != `{"content":"ok","tool_use_id":"toolu_2","type":"tool_result"}` {
		t.Errorf("successful tool result: %s", got)
	}
}

// DisableParallelToolCalls is tool_choice.disable_parallel_tool_use, on the tool choice
// asked for or on auto when none was; tool_choice none and a request without tools carry
// no flag.
func TestDisableParallelToolCalls(t *testing.T) {
	tools := []llmclient.Tool{{Name: "f"}}
	for _, tc := range []struct {
		name   string
		choice *llmclient.ToolChoice
		tools  []llmclient.Tool
		want   string
	}{
		{"default choice", nil, tools, `{"disable_parallel_tool_use":true,"type":"auto"}`},
		{"auto", &llmclient.ToolChoice{Mode: llmclient.ToolChoiceAuto}, tools, `{"disable_parallel_tool_use":true,"type":"auto"}`},
		{"required", &llmclient.ToolChoice{Mode: llmclient.ToolChoiceRequired}, tools, `{"disable_parallel_tool_use":true,"type":"any"}`},
		{"named", &llmclient.ToolChoice{Mode: llmclient.ToolChoiceTool, Name: "f"}, tools, `{"disable_parallel_tool_use":true,"name":"f","type":"tool"}`},
		{"none", &llmclient.ToolChoice{Mode: llmclient.ToolChoiceNone}, tools, `{"type":"none"}`},
		{"no tools", nil, nil, ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := sendBody(t, llmclient.Request{Messages: []llmclient.Message{llmclient.UserMessage("hi")},
				Tools: tc.tools, ToolChoice: tc.choice, DisableParallelToolCalls: true})
			if got := field(t, body, "tool_choice"); got != tc.want {
				t.Errorf("tool_choice = %s, want %s", got, tc.want)
			}
		})
	}
	body, _ := sendBody(t, llmclient.Request{Messages: []llmclient.Message{llmclient.UserMessage("hi")}, Tools: tools})
	if got := field(t, body, "tool_choice"); got != "" {
		t.Errorf("parallel calls allowed: tool_choice = %s, want none sent", got)
	}
}

// format.JSONObject has no Messages API equivalent: nothing is sent for it, and a note
// says so.
func TestJSONObjectFormatNoted(t *testing.T) {
	body, notes := sendBody(t, llmclient.Request{Messages: []llmclient.Message{llmclient.UserMessage("give me JSON")},
		ResponseFormat: &llmclient.ResponseFormat{Type: format.JSONObject}})
	if got := field(t, body, "output_config"); got != "" {
		t.Errorf("output_config = %s", got)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "json_object not sent") {
		t.Errorf("no note about json_object: %q", notes)
	}
}
