package openai_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/openai"
)

// sent sends req with Chat Completions, or the Responses API when responses is true, and
// returns the body decoded and the call's notes.
func sent(t *testing.T, req *llmclient.Request, responses bool) (map[string]any, []string) {
	t.Helper()
	var p *openai.Provider
	var u *upstream
	if responses {
		p, u = responsesProvider(t, reply{Body: respOK})
	} else {
		u = newUpstream(t, reply{Body: okBody})
		p = newProvider(t, u)
	}
	call := &llmclient.Call{Model: "gpt-4o", Request: req}
	providertest.Exchange(t, p, call, false)
	var body map[string]any
	if err := json.Unmarshal(u.Last(t).Body, &body); err != nil {
		t.Fatal(err)
	}
	return body, call.Notes
}

var apis = map[string]bool{"chat": false, "responses": true}

// DisableParallelToolCalls is parallel_tool_calls false in both APIs, sent only with tools
// (OpenAI refuses the field without them); unset, the field is not sent.
func TestDisableParallelToolCalls(t *testing.T) {
	tools := []llmclient.Tool{{Name: "get_weather"}}
	for api, responses := range apis {
		for _, tc := range []struct {
			name    string
			tools   []llmclient.Tool
			disable bool
			want    any
		}{
			{"disabled", tools, true, false},
			{"disabled without tools", nil, true, nil},
			{"default", tools, false, nil},
		} {
			t.Run(api+"/"+tc.name, func(t *testing.T) {
				body, _ := sent(t, &llmclient.Request{Model: "gpt-4o", Messages: []llmclient.Message{llmclient.UserMessage("hi")},
					Tools: tc.tools, DisableParallelToolCalls: tc.disable}, responses)
				got, present := body["parallel_tool_calls"]
				if tc.want == nil && present || tc.want != nil && got != tc.want {
					t.Errorf("parallel_tool_calls = %v (present %v), want %v", got, present, tc.want)
				}
			})
		}
	}
}

// A failed tool call's result has no error flag in either API: the result is sent as
// written, and a note says the mark was not sent.
func TestToolResultErrorMarkNoted(t *testing.T) {
	for api, responses := range apis {
		t.Run(api, func(t *testing.T) {
			req := &llmclient.Request{Model: "gpt-4o", Messages: []llmclient.Message{
				llmclient.UserMessage("weather?"),
				{Role: llmclient.RoleAssistant, ToolCalls: []llmclient.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{}`}}},
				{Role: llmclient.RoleTool, ToolCallID: "call_1", IsError: true, Content: []llmclient.Part{llmclient.TextPart("timeout")}},
			}}
			body, notes := sent(t, req, responses)
			if b, _ := json.Marshal(body); !strings.Contains(string(b), `"timeout"`) {
				t.Errorf("result not sent: %s", b)
			}
			if !strings.Contains(strings.Join(notes, "\n"), "message 2: the tool result's error mark not sent") {
				t.Errorf("no note about the error mark: %q", notes)
			}
		})
	}
}
