package llmclient_test

import (
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
)

// oaiDelta is a chat.completion.chunk event of stream id whose choice has delta and
// finish_reason (both JSON).
func oaiDelta(id, delta, finish string) ev {
	return ev{0, `data: {"id":"` + id + `","object":"chat.completion.chunk","created":100,"model":"gpt-4o","choices":[{"index":0,"delta":` +
		delta + `,"finish_reason":` + finish + `}]}` + "\n\n"}
}

// A Transport's restart whose text or reasoning goes on while tool-call arguments the
// caller received are still unmatched diverges: the body holds the first stream as it
// was, and nothing of the restart's chunk.
func TestTransportContinuationOutputBeforeTheDeliveredArgumentsDiverges(t *testing.T) {
	first := []ev{
		oaiDelta("s1", `{"role":"assistant","content":"Let me call."}`, "null"),
		oaiDelta("s1", `{"tool_calls":[{"index":0,"id":"call_x","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]}`, "null"),
	} // then the connection ends
	call := oaiDelta("s2", `{"tool_calls":[{"index":0,"id":"call_y","type":"function","function":{"name":"f","arguments":"{\"a"}}]}`, "null")
	tests := []struct {
		name  string
		after ev // follows the restart's text and part of its call
	}{
		{"text", oaiDelta("s2", `{"content":" Or not."}`, "null")},
		{"reasoning", oaiDelta("s2", `{"reasoning_content":"hmm"}`, "null")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newScript(sseStep(first...))
				b := newScript(sseStep(oaiDelta("s2", `{"role":"assistant","content":"Let me call."}`, "null"), call, tt.after,
					oaiDelta("s2", `{"tool_calls":[{"index":0,"function":{"arguments":"\":1}"}}]}`, "null"),
					oaiDelta("s2", `{}`, `"tool_calls"`), ev{0, done}))
				c, rt := contPair(t, a, b)
				body := readDiverged(t, rt)
				assert.Equal(t, first[0].data+first[1].data, body, "the first stream as it was, nothing of the restart")
				assert.Equal(t, 1, b.count())
				synctest.Wait()
				assert.Equal(t, 0, c.InFlight("a")+c.InFlight("b"))
			})
		})
	}
}
