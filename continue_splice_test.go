package llmclient_test

import (
	"context"
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

// A refusal is spliced as text is: a restart that repeats the refusal the caller received
// goes on after it; one that refuses otherwise, refuses where the caller received text,
// or answers where the caller received a refusal diverges, and the caller gets nothing of
// it.
func TestContinuationSplicesRefusals(t *testing.T) {
	refusal := func(s string) llmclient.Chunk { return llmclient.Chunk{Refusal: s} }
	tests := []struct {
		name           string
		first, restart []llmclient.Chunk
		finish         finish.Reason
		text, refusal  string // what the caller reads
		diverged       bool
	}{
		{"the same refusal", []llmclient.Chunk{refusal("I can"), refusal("'t help.")},
			[]llmclient.Chunk{refusal("I ca"), refusal("n't help.")}, finish.Refusal, "", "I can't help.", false},
		{"another refusal", []llmclient.Chunk{refusal("I can"), refusal("'t help.")},
			[]llmclient.Chunk{refusal("I won't.")}, finish.Refusal, "", "I can", true},
		{"a refusal where text was delivered", []llmclient.Chunk{answer("Sure, "), answer("here.")},
			[]llmclient.Chunk{refusal("I can't help.")}, finish.Refusal, "Sure, ", "", true},
		{"text where a refusal was delivered", []llmclient.Chunk{refusal("I can"), refusal("'t help.")},
			[]llmclient.Chunk{answer("Sure, here.")}, finish.Stop, "", "I can", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := fake.New(fake.StreamChunks(tt.first...).CutAfter(1))
				b := fake.New(fake.StreamChunks(tt.restart...).Finish(tt.finish))
				c := newClient(t, up("a", a), up("b", b))
				s, err := c.Stream(context.Background(), chatReq("m"))
				require.NoError(t, err)
				defer s.Close()
				var text, refused string
				for s.Next() {
					text += s.Current().Text
					refused += s.Current().Refusal
				}
				assert.Equal(t, tt.text, text)
				assert.Equal(t, tt.refusal, refused)
				err = s.Err()
				require.Error(t, err)
				var e *llmclient.Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, tt.text, e.Partial.Text)
				assert.Equal(t, tt.refusal, e.Partial.Refusal)
				if tt.diverged {
					assert.ErrorIs(t, err, llmclient.ErrContinuationDiverged)
					assert.Equal(t, failure.StreamInterrupted, llmclient.ClassOf(err))
				} else {
					assert.NotErrorIs(t, err, llmclient.ErrContinuationDiverged)
					assert.Equal(t, failure.ContentFiltered, llmclient.ClassOf(err), "a whole refusal, once")
				}
				assert.Equal(t, 1, b.Calls())
				synctest.Wait()
				assert.Equal(t, 0, c.InFlight("a")+c.InFlight("b"))
			})
		})
	}
}

// A restart whose text or reasoning goes on while tool-call arguments the caller received
// are still unmatched answers otherwise: it diverges before the caller gets anything of
// that chunk.
func TestContinuationRestartDivergesOnOutputBeforeTheDeliveredArguments(t *testing.T) {
	tool := func(id, name, args string) llmclient.Chunk {
		return llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 0, ID: id, Name: name, Arguments: args}}}
	}
	tests := []struct {
		name    string
		args    string // the delivered call's arguments
		restart []llmclient.Chunk
	}{
		{"text within the delivered arguments", `{"a":`, []llmclient.Chunk{answer("Let me call."), tool("call_b", "f", `{"a`), answer(" Or not.")}},
		{"reasoning within the delivered arguments", `{"a":`, []llmclient.Chunk{answer("Let me call."), tool("call_b", "f", `{"a`), thinking("hmm")}},
		{"text past the delivered text, before the delivered call", `{"a":`, []llmclient.Chunk{answer("Let me call. Or not.")}},
		{"reasoning before the delivered call", `{"a":`, []llmclient.Chunk{answer("Let me call."), thinking("hmm"), tool("call_b", "f", `{"a":1}`)}},
		{"text before a delivered call without arguments yet", "", []llmclient.Chunk{answer("Let me call. Or not.")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := fake.New(fake.StreamChunks(
					answer("Let me call."),
					tool("call_a", "f", tt.args),
					tool("", "", `{"a":1}`[len(tt.args):]),
				).Finish(finish.ToolCalls).CutAfter(2))
				b := fake.New(fake.StreamChunks(tt.restart...).Finish(finish.ToolCalls))
				c := newClient(t, up("a", a), up("b", b))
				s, err := c.Stream(context.Background(), chatReq("m"))
				require.NoError(t, err)
				defer s.Close()
				var text, reasoning, args string
				for s.Next() {
					ch := s.Current()
					text += ch.Text
					reasoning += ch.Reasoning
					for _, d := range ch.ToolCalls {
						args += d.Arguments
					}
				}
				assert.Equal(t, "Let me call.", text, "nothing of the restart's text")
				assert.Equal(t, "", reasoning, "nothing of the restart's reasoning")
				assert.Equal(t, tt.args, args)
				err = s.Err()
				require.Error(t, err)
				assert.ErrorIs(t, err, llmclient.ErrContinuationDiverged)
				assert.Equal(t, failure.StreamInterrupted, llmclient.ClassOf(err))
				var de *llmclient.DivergedError
				require.ErrorAs(t, err, &de)
				assert.Equal(t, 12, de.At, "past the delivered text")
				var e *llmclient.Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, "Let me call.", e.Partial.Text)
				assert.Equal(t, "", e.Partial.Reasoning)
				assert.Equal(t, []llmclient.ToolCall{{ID: "call_a", Name: "f", Arguments: tt.args}}, e.Partial.ToolCalls)
				synctest.Wait()
				assert.Equal(t, 0, c.InFlight("a")+c.InFlight("b"))
			})
		})
	}
}
