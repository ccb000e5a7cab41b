package gemini_test

import (
	"net/http"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/providertest"
)

// pngBytes is the start of a PNG file.
var pngBytes = []byte("\x89PNG\r\n\x1a\nfake")

// TestCrossVendorTranslation sends a conversation begun on other vendors: an image in the
// system prompt, images in tool results, OpenAI and Anthropic tool-call ids, a tool result
// that answers no call of the turn before, an out-of-range temperature and six stop
// sequences. The body is checked against testdata/cross_vendor.json (validated against
// the Gemini spec by provider/conformance/specs), and every translation leaves a note.
func TestCrossVendorTranslation(t *testing.T) {
	req := llmclient.Request{
		Messages: []llmclient.Message{
			{Role: llmclient.RoleSystem, Content: []llmclient.Part{llmclient.TextPart("You are a weather bot."), llmclient.ImageDataPart("image/png", pngBytes)}},
			llmclient.UserMessage("Weather in Paris and Rome?"),
			{Role: llmclient.RoleAssistant, ToolCalls: []llmclient.ToolCall{
				{ID: "call_Qp4tZkM9vX2bLw8nRj5sYc1d", Name: "get_weather", Arguments: `{"city":"Paris"}`},
				{ID: "toolu_01A09q90qw90lq917835lq9", Name: "get_weather", Arguments: `{"city":"Rome"}`},
			}},
			{Role: llmclient.RoleTool, ToolCallID: "call_Qp4tZkM9vX2bLw8nRj5sYc1d", Content: []llmclient.Part{
				llmclient.TextPart(`{"temp_c":18}`), llmclient.ImageURLPart("https://example.com/paris.png")}},
			{Role: llmclient.RoleTool, ToolCallID: "toolu_01A09q90qw90lq917835lq9", Content: []llmclient.Part{
				llmclient.ImageDataPart("image/png", pngBytes)}},
			llmclient.UserMessage("And the old one?"),
			{Role: llmclient.RoleTool, ToolCallID: "call_Qp4tZkM9vX2bLw8nRj5sYc1d", Content: []llmclient.Part{llmclient.TextPart("17C yesterday")}},
		},
		Temperature: llmclient.Float(3),
		Stop:        []string{"1", "2", "3", "4", "5", "6"},
	}
	p, rec := serve(t, providertest.Fixed(http.StatusOK, okBody))
	call := &llmclient.Call{Model: "gemini-2.5-flash", Request: &req}
	providertest.Exchange(t, p, call, false)
	providertest.Golden(t, "cross_vendor.json", rec.Last(t).Body, *update)
	providertest.EqualLines(t, call.Notes, []string{
		"gemini: message 0: 1 image(s) of the system prompt moved to a user turn (the system instruction takes text only)",
		"gemini: message 3: 1 image(s) of a tool result sent after the function responses (a function response takes JSON only)",
		"gemini: message 4: 1 image(s) of a tool result sent after the function responses (a function response takes JSON only)",
		`gemini: message 6: tool result "call_Qp4tZkM9vX2bLw8nRj5sYc1d" answers no call of the turn before; sent as text`,
		`gemini: kept the first 5 of 6 stop sequences (the vendor's maximum); dropped ["6"]`,
		"gemini: temperature 3 lowered to the maximum 2",
	})
}

// TestMadeUpIDsUniqueAcrossTurns checks that the ids made up for a response's calls are
// numbered after the calls of the request's history, so a conversation's ids never repeat.
func TestMadeUpIDsUniqueAcrossTurns(t *testing.T) {
	const twoCalls = `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}},{"functionCall":{"name":"g"}}]},"finishReason":"STOP"}],"modelVersion":"m","responseId":"r"}`
	history := []llmclient.Message{
		llmclient.UserMessage("go"),
		{Role: llmclient.RoleAssistant, ToolCalls: []llmclient.ToolCall{{ID: "call_0", Name: "f"}, {ID: "call_1", Name: "g"}}},
		llmclient.ToolResultMessage("call_0", "a"), llmclient.ToolResultMessage("call_1", "b"),
	}
	p, _ := serve(t, providertest.Fixed(http.StatusOK, twoCalls))
	resp := providertest.Complete(t, p, &llmclient.Call{Model: "m", Request: &llmclient.Request{Messages: history}})
	if len(resp.ToolCalls) != 2 || resp.ToolCalls[0].ID != "call_2" || resp.ToolCalls[1].ID != "call_3" {
		t.Errorf("tool calls %+v, want ids call_2 and call_3", resp.ToolCalls)
	}
	sp, _ := serve(t, providertest.SSE("data: "+twoCalls+"\n\n"))
	st, err := sp.Stream(t.Context(), &llmclient.Call{Model: "m", Request: &llmclient.Request{Messages: history}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := st.Recv()
	if err != nil || len(c.ToolCalls) != 2 || c.ToolCalls[0].ID != "call_2" || c.ToolCalls[1].ID != "call_3" || c.ToolCalls[0].Index != 0 {
		t.Errorf("stream chunk %+v, %v; want ids call_2 and call_3 at indexes 0 and 1", c.ToolCalls, err)
	}
}
