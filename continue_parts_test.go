package llmclient_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
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
