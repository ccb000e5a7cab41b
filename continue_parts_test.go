package llmclient_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func toolChunk(index int, id, name, args string) llmclient.Chunk {
	return llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: index, ID: id, Name: name, Arguments: args}}}
}

// The reasoning the caller received after its answer began — between tool calls, as
// interleaved thinking gives it — is matched in order as text is: a restart that repeats
// it goes on after it; one that reasons otherwise there, leaves it out before the next
// call, or reasons on where the caller's next call begins, diverges there. The restart's
// reasoning before its answer is skipped, as before.
func TestContinuationMatchesReasoningBetweenToolCalls(t *testing.T) {
	first := []llmclient.Chunk{
		thinking("plan"),
		toolChunk(0, "call_a", "f", `{"a":1}`),
		thinking("then g"),
		toolChunk(1, "call_b", "g", `{"b":`),
		toolChunk(1, "", "", `2}`),
	}
	callA := []llmclient.Chunk{toolChunk(0, "x", "f", `{"a":`), toolChunk(0, "", "", `1}`)}
	tests := []struct {
		name    string
		restart []llmclient.Chunk
		args    map[int]string // what the caller reads
		offset  int            // of the divergence in the delivered reasoning; -1: none
		part    llmclient.DivergedPart
		call    int
	}{
		{"the same reasoning", append(append([]llmclient.Chunk{thinking("another plan")}, callA...),
			thinking("then"), thinking(" g"), toolChunk(1, "y", "g", `{"b":2}`)),
			map[int]string{0: `{"a":1}`, 1: `{"b":2}`}, -1, "", -1},
		{"the same reasoning in the call's chunk", append(append([]llmclient.Chunk{}, callA...),
			llmclient.Chunk{Reasoning: "then g", ToolCalls: []dialect.ToolCallDelta{{Index: 1, ID: "y", Name: "g", Arguments: `{"b":2}`}}}),
			map[int]string{0: `{"a":1}`, 1: `{"b":2}`}, -1, "", -1},
		{"other reasoning", append(append([]llmclient.Chunk{}, callA...), thinking("then h"), toolChunk(1, "y", "g", `{"b":2}`)),
			map[int]string{0: `{"a":1}`, 1: `{"b":`}, len("plan") + len("then "), llmclient.DivergedReasoning, -1},
		{"the next call without the reasoning before it", append(append([]llmclient.Chunk{}, callA...), toolChunk(1, "y", "g", `{"b":2}`)),
			map[int]string{0: `{"a":1}`, 1: `{"b":`}, len("plan"), llmclient.DivergedReasoning, -1},
		{"reasoning where the next call begins", append(append([]llmclient.Chunk{}, callA...), thinking("then g, or h"), toolChunk(1, "y", "g", `{"b":2}`)),
			map[int]string{0: `{"a":1}`, 1: `{"b":`}, 0, llmclient.DivergedToolCall, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := fake.New(fake.StreamChunks(first...).Finish(finish.ToolCalls).CutAfter(4))
				b := fake.New(fake.StreamChunks(tt.restart...).Finish(finish.ToolCalls))
				c := newClient(t, up("a", a), up("b", b))
				s, err := c.Stream(context.Background(), chatReq("m"))
				require.NoError(t, err)
				defer s.Close()
				var reasoning string
				args := map[int]string{}
				for s.Next() {
					ch := s.Current()
					reasoning += ch.Reasoning
					for _, d := range ch.ToolCalls {
						args[d.Index] += d.Arguments
					}
				}
				assert.Equal(t, "planthen g", reasoning, "the caller's reasoning once, nothing of the restart's")
				assert.Equal(t, tt.args, args)
				err = s.Err()
				if tt.offset < 0 {
					require.NoError(t, err)
					resp := s.Response()
					assert.Equal(t, "planthen g", resp.Reasoning)
					assert.Equal(t, []llmclient.ToolCall{{ID: "call_a", Name: "f", Arguments: `{"a":1}`},
						{ID: "call_b", Name: "g", Arguments: `{"b":2}`}}, resp.ToolCalls)
				} else {
					require.ErrorIs(t, err, llmclient.ErrContinuationDiverged)
					assert.Equal(t, failure.StreamInterrupted, llmclient.ClassOf(err))
					var de *llmclient.DivergedError
					require.ErrorAs(t, err, &de)
					assert.Equal(t, tt.part, de.Part)
					assert.Equal(t, tt.offset, de.Offset)
					assert.Equal(t, tt.call, de.ToolCall)
					assert.Equal(t, 0, de.At, "no text delivered")
					assert.NotContains(t, err.Error(), "then", "no reasoning in the message")
				}
				synctest.Wait()
				assert.Equal(t, 0, c.InFlight("a")+c.InFlight("b"))
			})
		})
	}
}

// A DivergedError says which part of the delivered answer the restart did not repeat and
// where in it: At stays the offset in the delivered text, Part, Offset and ToolCall locate
// a difference in the refusal or a tool call's arguments too. Its message holds no
// content.
func TestDivergedErrorLocatesThePart(t *testing.T) {
	tests := []struct {
		name           string
		first          []llmclient.Chunk
		cut            int
		restart        []llmclient.Chunk
		part           llmclient.DivergedPart
		at, offset     int
		call           int
		message, leaks string
	}{
		{"other text", []llmclient.Chunk{answer("one "), answer("two "), answer("three")}, 2,
			[]llmclient.Chunk{answer("one deux")}, llmclient.DivergedText, 4, 4, -1, "at byte 4", "deux"},
		{"another refusal", []llmclient.Chunk{refusalChunk("I can"), refusalChunk("'t help.")}, 1,
			[]llmclient.Chunk{refusalChunk("I won't.")}, llmclient.DivergedRefusal, 0, 2, -1, "at byte 2 of the refusal", "won't"},
		{"a shorter refusal", []llmclient.Chunk{refusalChunk("I can"), refusalChunk("'t help.")}, 2,
			[]llmclient.Chunk{refusalChunk("I can")}, llmclient.DivergedRefusal, 0, 5, -1, "at byte 5 of the refusal", "can"},
		{"other arguments", []llmclient.Chunk{answer("Let me call."), toolChunk(0, "call_a", "f", `{"a":`)}, 2,
			[]llmclient.Chunk{answer("Let me call."), toolChunk(0, "call_b", "f", `{"a`), toolChunk(0, "", "", `zq":1}`)},
			llmclient.DivergedToolCall, 12, 3, 0, "at byte 3 of tool call 0's arguments", "zq"},
		{"another tool", []llmclient.Chunk{answer("Let me call."), toolChunk(0, "call_a", "f", `{"a":`)}, 2,
			[]llmclient.Chunk{answer("Let me call."), toolChunk(0, "call_b", "weather", `{"a":1}`)},
			llmclient.DivergedToolCall, 12, 0, 0, "at byte 0 of tool call 0's arguments", "weather"},
		{"text where the delivered call goes on", []llmclient.Chunk{answer("Let me call."), toolChunk(0, "call_a", "f", `{"a":`)}, 2,
			[]llmclient.Chunk{answer("Let me call."), toolChunk(0, "call_b", "f", `{"a`), answer(" Or not.")},
			llmclient.DivergedToolCall, 12, 3, 0, "at byte 3 of tool call 0's arguments", "not"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := fake.New(fake.StreamChunks(tt.first...).CutAfter(tt.cut))
				b := fake.New(fake.StreamChunks(tt.restart...))
				c := newClient(t, up("a", a), up("b", b))
				s, err := c.Stream(context.Background(), chatReq("m"))
				require.NoError(t, err)
				defer s.Close()
				for s.Next() {
				}
				var de *llmclient.DivergedError
				require.ErrorAs(t, s.Err(), &de)
				assert.Equal(t, tt.part, de.Part)
				assert.Equal(t, tt.at, de.At)
				assert.Equal(t, tt.offset, de.Offset)
				assert.Equal(t, tt.call, de.ToolCall)
				assert.True(t, strings.HasSuffix(de.Error(), tt.message), "%q", de.Error())
				assert.NotContains(t, s.Err().Error(), tt.leaks, "no content in the message")
				synctest.Wait()
				assert.Equal(t, 0, c.InFlight("a")+c.InFlight("b"))
			})
		})
	}
}

// A Transport's Anthropic stream with interleaved thinking — a thinking block between two
// tool_use blocks — cut in the second call restarts on a fallback that thinks the same
// between the calls: the body goes on with the rest of the second call's input, and
// holds each thinking and each input once.
func TestTransportContinuationMatchesThinkingBetweenToolCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := func(id string) ev {
			return antEvent("message_start", `{"type":"message_start","message":{"id":"`+id+`","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","usage":{"input_tokens":10,"output_tokens":1}}}`)
		}
		thinkingBlock := func(i int, text string) []ev {
			return []ev{
				antEvent("content_block_start", `{"type":"content_block_start","index":`+itoa(i)+`,"content_block":{"type":"thinking","thinking":"","signature":""}}`),
				antEvent("content_block_delta", `{"type":"content_block_delta","index":`+itoa(i)+`,"delta":{"type":"thinking_delta","thinking":"`+text+`"}}`),
				antEvent("content_block_stop", `{"type":"content_block_stop","index":`+itoa(i)+`}`),
			}
		}
		toolBlock := func(i int, id, name string, parts ...string) []ev {
			evs := []ev{antEvent("content_block_start", `{"type":"content_block_start","index":`+itoa(i)+`,"content_block":{"type":"tool_use","id":"`+id+`","name":"`+name+`","input":{}}}`)}
			for _, p := range parts {
				evs = append(evs, antEvent("content_block_delta", `{"type":"content_block_delta","index":`+itoa(i)+`,"delta":{"type":"input_json_delta","partial_json":"`+p+`"}}`))
			}
			return append(evs, antEvent("content_block_stop", `{"type":"content_block_stop","index":`+itoa(i)+`}`))
		}
		cat := func(parts ...[]ev) []ev {
			var out []ev
			for _, p := range parts {
				out = append(out, p...)
			}
			return out
		}
		first := cat([]ev{start("msg_1")}, thinkingBlock(0, "plan"), toolBlock(1, "toolu_1", "f", `{\"a\":1}`),
			thinkingBlock(2, "then g"), toolBlock(3, "toolu_2", "g", `{\"b\":`))
		first = first[:len(first)-1] // cut before the second call's block ends
		second := cat([]ev{start("msg_2")}, thinkingBlock(0, "another plan"), toolBlock(1, "toolu_8", "f", `{\"a\":`, `1}`),
			thinkingBlock(2, "then g"), toolBlock(3, "toolu_9", "g", `{\"b\":2}`), []ev{
				antEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":9}}`),
				antEvent("message_stop", `{"type":"message_stop"}`)})
		a, b := newScript(sseStep(first...)), newScript(sseStep(second...))
		var ups []llmclient.Option
		for _, name := range []string{"a", "b"} {
			p, err := anthropic.New(anthropic.WithBaseURL("http://" + name + ".test"))
			require.NoError(t, err)
			ups = append(ups, llmclient.WithUpstream(llmclient.Upstream{Name: name, Provider: p}))
		}
		c := newClient(t, append(ups, llmclient.WithModelGroup("claude-sonnet-4-5", "a", "b"))...)
		rt := c.Transport(memTransport{hostMux{"a.test": a, "b.test": b}})
		resp, err := post(t, context.Background(), rt, "http://a.test/v1/messages",
			`{"model":"claude-sonnet-4-5","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
		require.NoError(t, err)
		body, err := readBody(t, resp)
		require.NoError(t, err, "the restart repeats the thinking between the calls")
		var thinking string
		input := map[int]string{}
		stops := 0
		for _, e := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
			name, data, ok := strings.Cut(strings.TrimPrefix(e, "event: "), "\ndata: ")
			require.True(t, ok, "event %q", e)
			var v struct {
				Index int `json:"index"`
				Delta struct {
					Thinking    string `json:"thinking"`
					PartialJSON string `json:"partial_json"`
				} `json:"delta"`
			}
			require.NoError(t, json.Unmarshal([]byte(data), &v), "event %q", e)
			switch name {
			case "content_block_delta":
				thinking += v.Delta.Thinking
				input[v.Index] += v.Delta.PartialJSON
			case "message_stop":
				stops++
			}
		}
		assert.Equal(t, "planthen g", thinking, "each thinking once")
		assert.Equal(t, map[int]string{0: "", 1: `{"a":1}`, 2: "", 3: `{"b":2}`}, input)
		assert.Equal(t, 1, stops)
		synctest.Wait()
		assert.Equal(t, 0, c.InFlight("a")+c.InFlight("b"))
	})
}
