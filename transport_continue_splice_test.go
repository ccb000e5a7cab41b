package llmclient_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// oaiDelta is a chat.completion.chunk event of stream id whose choice has delta and
// finish_reason (both JSON).
func oaiDelta(id, delta, finish string) ev {
	return ev{0, `data: {"id":"` + id + `","object":"chat.completion.chunk","created":100,"model":"gpt-4o","choices":[{"index":0,"delta":` +
		delta + `,"finish_reason":` + finish + `}]}` + "\n\n"}
}

// oaiDeltas returns the text, refusal and reasoning the chat completion stream body
// delivers.
func oaiDeltas(t *testing.T, body string) (text, refusal, reasoning string) {
	t.Helper()
	for _, e := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		data := strings.TrimPrefix(e, "data: ")
		if data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					Refusal   string `json:"refusal"`
					Reasoning string `json:"reasoning_content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal([]byte(data), &c), "event %q", e)
		for _, ch := range c.Choices {
			text += ch.Delta.Content
			refusal += ch.Delta.Refusal
			reasoning += ch.Delta.Reasoning
		}
	}
	return text, refusal, reasoning
}

// A Transport's continuation splices an OpenAI refusal (delta.refusal) as text: the
// same refusal goes on where the caller's stopped; another refusal, a refusal where the
// caller received text, or text where it received a refusal diverges, and the body holds
// the first stream as it was.
func TestTransportContinuationSplicesRefusals(t *testing.T) {
	role := oaiDelta("s1", `{"role":"assistant","content":""}`, "null")
	tests := []struct {
		name     string
		first    []ev // then the connection ends
		restart  []ev
		diverged bool
	}{
		{"the same refusal", []ev{role, oaiDelta("s1", `{"refusal":"I can"}`, "null")},
			[]ev{oaiDelta("s2", `{"role":"assistant","refusal":"I ca"}`, "null"), oaiDelta("s2", `{"refusal":"n't help."}`, "null")}, false},
		{"another refusal", []ev{role, oaiDelta("s1", `{"refusal":"I can"}`, "null")},
			[]ev{oaiDelta("s2", `{"role":"assistant","refusal":"I won't."}`, "null")}, true},
		{"a refusal where text was delivered", []ev{role, oaiDelta("s1", `{"content":"Sure, "}`, "null")},
			[]ev{oaiDelta("s2", `{"role":"assistant","refusal":"I can't help."}`, "null")}, true},
		{"text where a refusal was delivered", []ev{role, oaiDelta("s1", `{"refusal":"I can"}`, "null")},
			[]ev{oaiDelta("s2", `{"role":"assistant","content":"Sure, here."}`, "null")}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newScript(sseStep(tt.first...))
				b := newScript(sseStep(append(tt.restart, oaiDelta("s2", `{}`, `"stop"`), ev{0, done})...))
				c, rt := contPair(t, a, b)
				if tt.diverged {
					body := readDiverged(t, rt)
					assert.Equal(t, tt.first[0].data+tt.first[1].data, body, "the first stream as it was, nothing of the restart")
				} else {
					resp, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions", streamBody)
					require.NoError(t, err)
					body, err := readBody(t, resp)
					require.NoError(t, err)
					text, refusal, _ := oaiDeltas(t, body)
					assert.Equal(t, "", text)
					assert.Equal(t, "I can't help.", refusal, "the refusal once")
				}
				assert.Equal(t, 1, b.count())
				synctest.Wait()
				assert.Equal(t, 0, c.InFlight("a")+c.InFlight("b"))
			})
		})
	}
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
