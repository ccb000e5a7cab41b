package gemini_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/providertest"
)

// A failed tool call's result goes under the function response's "error" key (the spec's
// key for a call that failed): a JSON object as it is, other text as a string. A result
// that answers no call of the turn before says it is an error in its text.
func TestToolResultIsError(t *testing.T) {
	call := func(id string) llmclient.Message {
		return llmclient.Message{Role: llmclient.RoleAssistant, ToolCalls: []llmclient.ToolCall{{ID: id, Name: "get_weather", Arguments: `{}`}}}
	}
	failed := func(id, text string) llmclient.Message {
		return llmclient.Message{Role: llmclient.RoleTool, ToolCallID: id, IsError: true, Content: []llmclient.Part{llmclient.TextPart(text)}}
	}
	req := llmclient.Request{Messages: []llmclient.Message{
		llmclient.UserMessage("weather?"),
		call("call_a"), failed("call_a", "timeout"),
		call("call_b"), failed("call_b", `{"code":504}`),
		call("call_c"), llmclient.ToolResultMessage("call_c", "18C"),
		llmclient.UserMessage("and the first?"), failed("call_a", "timeout"),
	}}
	p, rec := serve(t, providertest.Fixed(http.StatusOK, okBody))
	providertest.Exchange(t, p, &llmclient.Call{Model: "gemini-2.5-flash", Request: &req}, false)
	var body struct {
		Contents []struct {
			Parts []struct {
				Text             string `json:"text"`
				FunctionResponse *struct {
					Response json.RawMessage `json:"response"`
				} `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(rec.Last(t).Body, &body); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range body.Contents {
		for _, p := range c.Parts {
			if p.FunctionResponse != nil {
				got = append(got, string(p.FunctionResponse.Response))
			}
		}
	}
	want := []string{`{"error":"timeout"}`, `{"error":{"code":504}}`, `{"output":"18C"}`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("function responses %s, want %s", got, want)
	}
	last := body.Contents[len(body.Contents)-1].Parts
	if text := last[len(last)-1].Text; text != "Error from tool get_weather (call call_a): timeout" {
		t.Errorf("unanswered failed result sent as %q", text)
	}
}

// Gemini has no setting for parallel function calls: DisableParallelToolCalls sends
// nothing and leaves a note.
func TestDisableParallelToolCallsNoted(t *testing.T) {
	req := llmclient.Request{Messages: []llmclient.Message{llmclient.UserMessage("hi")},
		Tools: []llmclient.Tool{{Name: "get_weather"}}, DisableParallelToolCalls: true}
	p, rec := serve(t, providertest.Fixed(http.StatusOK, okBody))
	call := &llmclient.Call{Model: "gemini-2.5-flash", Request: &req}
	providertest.Exchange(t, p, call, false)
	if strings.Contains(strings.ToLower(string(rec.Last(t).Body)), "parallel") {
		t.Errorf("body: %s", rec.Last(t).Body)
	}
	providertest.EqualLines(t, call.Notes, []string{
		"gemini: parallel tool calls not disabled: Gemini has no such setting (the model may call several functions at once)",
	})
}
