package openai_test

import (
	"testing"

	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/provider/openai"
)

// respCacheWriteUsage is a Responses usage object that reports cache writes:
// ResponseUsage.input_tokens_details.cache_write_tokens (required in the schema).
const respCacheWriteUsage = `{"input_tokens":5000,"input_tokens_details":{"cached_tokens":1000,"cache_write_tokens":3000},"output_tokens":10,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":5010}`

// respCacheWrite is a Responses body with respCacheWriteUsage.
const respCacheWrite = `{"id":"resp_1","object":"response","status":"completed","error":null,"incomplete_details":null,"model":"gpt-6-astra",
"output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi","annotations":[]}]}],
"usage":` + respCacheWriteUsage + `}`

// TestResponsesCacheWriteTokens checks the Responses API's count, one-shot and as the
// transport reads it.
func TestResponsesCacheWriteTokens(t *testing.T) {
	p, _ := responsesProvider(t, reply{Body: respCacheWrite})
	checkCacheWrite(t, "Complete", providertest.Complete(t, p, simpleCall("gpt-6-astra")).Usage)
	u, model, ok := p.ReadUsage(openai.ShapeResponses, []byte(respCacheWrite))
	if !ok || model != "gpt-6-astra" {
		t.Errorf("ReadUsage: ok %v, model %q", ok, model)
	}
	checkCacheWrite(t, "ReadUsage", u)
	u, ok = p.ReadTokenUsage(openai.ShapeResponses, []byte(respCacheWrite))
	if !ok {
		t.Error("ReadTokenUsage: not ok")
	}
	checkCacheWrite(t, "ReadTokenUsage", u)
}

// TestResponsesStreamCacheWriteTokens checks the count in the usage of the event that
// ends a Responses stream, response.completed or response.incomplete.
func TestResponsesStreamCacheWriteTokens(t *testing.T) {
	for _, end := range []string{"completed", "incomplete"} {
		t.Run(end, func(t *testing.T) {
			body := sseEvent("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","model":"gpt-6-astra","status":"in_progress"}}`) +
				sseEvent("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi"}`) +
				sseEvent("response."+end, `{"type":"response.`+end+`","sequence_number":2,"response":{"id":"resp_1","object":"response","status":"`+end+`","model":"gpt-6-astra","output":[],"usage":`+respCacheWriteUsage+`}}`)
			p, _ := responsesProvider(t, reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: body})
			checkCacheWrite(t, "stream", streamUsage(t, p))
		})
	}
}

// TestResponsesCacheWritesPriced checks that a Client prices the Responses API's cache
// writes as a Chat Completions answer's.
func TestResponsesCacheWritesPriced(t *testing.T) {
	got := clientCost(t, respCacheWrite, openai.WithResponsesAPI())
	if want := gpt6AstraCost(1000, 1000, 3000, 10); !got.Known || got.Estimated || got.Amount != want {
		t.Errorf("cost %v (%+v), want %v", got, got, want)
	}
}
