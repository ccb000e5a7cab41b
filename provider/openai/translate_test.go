package openai_test

import (
	"context"
	"errors"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/providertest"
)

// TestCrossVendorTranslation sends a conversation begun on other vendors: a Gemini signed
// tool call id longer than OpenAI's 40 characters, images in the system prompt and in tool
// results, an out-of-range temperature and five stop sequences. The body is checked
// against testdata/request_cross_vendor.json (validated against the OpenAI spec by
// provider/conformance/specs), and every translation leaves a note.
func TestCrossVendorTranslation(t *testing.T) {
	signed := "call_0__thought__CiQBcsjafDx7c2lnbmF0dXJlIG9mIGEgdGhvdWdodA+/w=="
	req := &llmclient.Request{
		Model: "gpt-4o",
		Messages: []llmclient.Message{
			{Role: llmclient.RoleSystem, Content: []llmclient.Part{llmclient.TextPart("You are a weather bot."), llmclient.ImageURLPart("https://example.com/logo.png")}},
			llmclient.UserMessage("Weather in Paris and Rome?"),
			{Role: llmclient.RoleAssistant, ToolCalls: []llmclient.ToolCall{
				{ID: signed, Name: "get_weather", Arguments: `{"city":"Paris"}`},
				{ID: "functions.get_weather:1", Name: "get_weather", Arguments: `{"city":"Rome"}`},
			}},
			{Role: llmclient.RoleTool, ToolCallID: signed, Content: []llmclient.Part{llmclient.TextPart("18C, radar:"), llmclient.ImageURLPart("https://example.com/paris.png")}},
			{Role: llmclient.RoleTool, ToolCallID: "functions.get_weather:1", Content: []llmclient.Part{llmclient.ImageDataPart("image/png", pngHeader)}},
			llmclient.UserMessage("Which is warmer?"),
		},
		Temperature: llmclient.Float(2.5),
		Stop:        []string{"1", "2", "3", "4", "5"},
	}
	u := newUpstream(t, reply{Body: okBody})
	p := newProvider(t, u)
	call := &llmclient.Call{Model: "gpt-4o", Request: req}
	providertest.Exchange(t, p, call, false)
	providertest.Golden(t, "request_cross_vendor.json", u.Last(t).Body, *update)
	providertest.EqualLines(t, call.Notes, []string{
		`openai: kept the first 4 of 5 stop sequences (the vendor's maximum); dropped ["5"]`,
		"openai: temperature 2.5 lowered to the maximum 2",
		"openai: message 0: 1 image(s) of a system message moved to a user message (system messages take text only)",
		`openai: tool call id "call_0__thought__CiQBcsjafDx7c2lnbmF0dXJlIG9mIGEgdGhvdWdodA+/w==" sent as "lch_5b95e5219304cd215f7a0b06288b8709e1a5" (OpenAI takes ids of at most 40 characters)`,
		"openai: message 3: 1 image(s) of a tool message moved to a user message (tool messages take text only)",
		"openai: message 4: 1 image(s) of a tool message moved to a user message (tool messages take text only)",
	})
}

// TestAssistantImageRefused checks that an image in an assistant turn, which Chat
// Completions cannot take, is refused before any call with an error wrapping
// llmclient.ErrUnsupported, so that the Client can try another upstream.
func TestAssistantImageRefused(t *testing.T) {
	u := newUpstream(t, reply{Body: okBody})
	p := newProvider(t, u)
	req := &llmclient.Request{Model: "gpt-4o", Messages: []llmclient.Message{
		llmclient.UserMessage("Draw a cat."),
		{Role: llmclient.RoleAssistant, Content: []llmclient.Part{llmclient.ImageDataPart("image/png", pngHeader)}},
		llmclient.UserMessage("Thanks."),
	}}
	_, err := p.Complete(context.Background(), &llmclient.Call{Model: "gpt-4o", Request: req})
	e := providertest.AsError(t, err)
	if e.Class != failure.BadRequest || !errors.Is(err, llmclient.ErrUnsupported) || e.Message != "openai: message 1: an assistant message with an image (Chat Completions takes only text in assistant messages)" {
		t.Errorf("err = %+v", e)
	}
	if u.Len() != 0 {
		t.Error("the refused request reached the server")
	}
}
