package llmclient_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lastRole is the role of the last message of the n-th request p received.
func lastRole(p *fake.Provider, n int) llmclient.Role {
	msgs := p.Requests()[n].Request.Messages
	return msgs[len(msgs)-1].Role
}

// A stream cut after its first tokens continues on a prefill-capable fallback: the
// partial answer goes as a prefill, the caller reads one whole answer, and the Response
// sums the usage of both attempts.
func TestContinuationWithPrefill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Stream("one ", "two ", "three").Usage(10, 2).CutAfter(2))
		b := fake.New(fake.Stream("three").Usage(14, 1))
		var log eventLog
		c := newClient(t, up("a", a), up("b", b), llmclient.WithPrefill("b", true), llmclient.WithObserver(log.observe))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		text, err := readAll(s)
		require.NoError(t, err)
		assert.Equal(t, "one two three", text)
		resp := s.Response()
		assert.Equal(t, "one two three", resp.Text)
		assert.Equal(t, "b", resp.Upstream)
		assert.True(t, resp.Fallback)
		require.Len(t, resp.Attempts, 2)
		assert.Equal(t, failure.StreamInterrupted, resp.Attempts[0].Class)
		assert.Equal(t, failure.None, resp.Attempts[1].Class)
		assert.Equal(t, 14, resp.Usage.InputTokens-resp.Attempts[0].Usage.InputTokens)
		assert.Equal(t, resp.Attempts[0].Usage.OutputTokens+1, resp.Usage.OutputTokens)
		require.Equal(t, 1, b.Calls())
		assert.Equal(t, llmclient.RoleAssistant, lastRole(b, 0), "the partial answer is the prefill")
		cont := log.kinds(event.Continuation)
		require.Len(t, cont, 1)
		assert.Equal(t, "a", cont[0].Upstream)
		assert.Equal(t, "b", cont[0].Target)
		assert.Equal(t, "prefill", cont[0].Action)
		calls := log.kinds(event.Call)
		require.Len(t, calls, 1, "one call, one EventCall")
		assert.Equal(t, failure.None, calls[0].Class)
		assert.Equal(t, 0, c.InFlight("a")+c.InFlight("b"))
	})
}

// Without prefill the request is sent again and the new answer is spliced: what the
// caller already has is skipped, wherever the new chunks break.
func TestContinuationRestartSplices(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Stream("one ", "two ", "three").CutAfter(2))
		b := fake.New(fake.Stream("on", "e two thr", "ee"))
		var log eventLog
		c := newClient(t, up("a", a), up("b", b), llmclient.WithObserver(log.observe))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		var got []string
		for s.Next() {
			if tx := s.Current().Text; tx != "" {
				got = append(got, tx)
			}
		}
		require.NoError(t, s.Err())
		assert.Equal(t, []string{"one ", "two ", "thr", "ee"}, got)
		assert.Equal(t, "one two three", s.Response().Text)
		assert.Equal(t, llmclient.RoleUser, lastRole(b, 0), "no prefill: the request as it was")
		cont := log.kinds(event.Continuation)
		require.Len(t, cont, 1)
		assert.Equal(t, "restart", cont[0].Action)
	})
}

// A restarted answer that does not begin with what the caller has ends the stream with a
// typed error carrying both texts; nothing of the new answer reaches the caller.
func TestContinuationRestartDiverges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Stream("one ", "two ", "three").CutAfter(2))
		b := fake.New(fake.Stream("one ", "deux ", "trois"))
		var log eventLog
		c := newClient(t, up("a", a), up("b", b), llmclient.WithObserver(log.observe))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		text, err := readAll(s)
		assert.Equal(t, "one two ", text)
		require.Error(t, err)
		assert.ErrorIs(t, err, llmclient.ErrContinuationDiverged)
		assert.Equal(t, failure.StreamInterrupted, llmclient.ClassOf(err))
		var de *llmclient.DivergedError
		require.ErrorAs(t, err, &de)
		assert.Equal(t, "one two ", de.Delivered)
		assert.Equal(t, "one d", de.Restarted[:5])
		assert.Equal(t, 4, de.At)
		assert.NotContains(t, err.Error(), "deux", "no completion text in the message")
		var e *llmclient.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, "one two ", e.Partial.Text)
		require.Len(t, e.Attempts, 2)
		calls := log.kinds(event.Call)
		require.Len(t, calls, 1)
		assert.Equal(t, failure.StreamInterrupted, calls[0].Class)
		assert.Equal(t, 0, b.Calls()-1)
		assert.Equal(t, 0, c.Breaker("b").Snapshot().Failures, "the restart's upstream did nothing wrong")
	})
}

// A restarted answer shorter than what the caller has diverges too.
func TestContinuationRestartShorterDiverges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Stream("one ", "two ", "three").CutAfter(2))
		b := fake.New(fake.Stream("one"))
		c := newClient(t, up("a", a), up("b", b))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		text, err := readAll(s)
		assert.Equal(t, "one two ", text)
		assert.ErrorIs(t, err, llmclient.ErrContinuationDiverged)
	})
}

// A stream that stalls mid-answer past its idle timeout continues elsewhere.
func TestContinuationAfterAStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Stream("one ", "two ", "three").StallAfter(2, time.Hour))
		b := fake.New(fake.Stream("one ", "two ", "three"))
		c := newClient(t, up("a", a), up("b", b), llmclient.WithIdleTimeout(5*time.Second))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		var text string
		d := elapsed(func() { text, err = readAll(s) })
		require.NoError(t, err)
		assert.Equal(t, "one two three", text)
		assert.Equal(t, 5*time.Second, d)
		assert.ErrorIs(t, s.Response().Attempts[0].Err, llmclient.ErrIdleTimeout)
	})
}

// An in-band error event mid-answer continues elsewhere; with one upstream, on the same.
func TestContinuationAfterAnInBandError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(
			fake.Stream("one ", "two ", "three").FailAfter(2, fake.Fail(529).Type("overloaded_error")),
			fake.Stream("one ", "two ", "three"))
		c := newClient(t, up("a", p))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		text, err := readAll(s)
		require.NoError(t, err)
		assert.Equal(t, "one two three", text)
		assert.Equal(t, 2, p.Calls())
		assert.False(t, s.Response().Fallback)
	})
}

// Tool-call deltas keep their index and first ID across a splice, and the finish reason
// is the restart's.
func TestContinuationSplicesToolCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.StreamChunks(
			llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 0, ID: "call_a", Name: "lookup", Arguments: `{"q":`}}},
			llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 0, Arguments: `"par`}}},
			llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 0, Arguments: `is"}`}}},
		).Finish(finish.ToolCalls).CutAfter(2))
		b := fake.New(fake.StreamChunks(
			llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 0, ID: "call_b", Name: "lookup", Arguments: `{"q":"pa`}}},
			llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 0, Arguments: `ris"}`}}},
		).Finish(finish.ToolCalls))
		c := newClient(t, up("a", a), up("b", b))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		var args string
		for s.Next() {
			for _, d := range s.Current().ToolCalls {
				assert.Equal(t, 0, d.Index)
				assert.NotEqual(t, "call_b", d.ID)
				args += d.Arguments
			}
		}
		require.NoError(t, s.Err())
		assert.Equal(t, `{"q":"paris"}`, args)
		resp := s.Response()
		require.Len(t, resp.ToolCalls, 1)
		assert.Equal(t, llmclient.ToolCall{ID: "call_a", Name: "lookup", Arguments: `{"q":"paris"}`}, resp.ToolCalls[0])
		assert.Equal(t, finish.ToolCalls, resp.FinishReason)
	})
}

// A target that rejects the prefill after all (a 400) gets the restart instead: its 400
// never stands for the stream's failure.
func TestContinuationPrefillRejectedRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Stream("one ", "two ", "three").CutAfter(2))
		b := fake.New(fake.Fail(400).Message("assistant prefill is not supported"), fake.Stream("one ", "two ", "three"))
		c := newClient(t, up("a", a), up("b", b), llmclient.WithPrefill("b", true))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		text, err := readAll(s)
		require.NoError(t, err)
		assert.Equal(t, "one two three", text)
		require.Equal(t, 2, b.Calls())
		assert.Equal(t, llmclient.RoleAssistant, lastRole(b, 0))
		assert.Equal(t, llmclient.RoleUser, lastRole(b, 1))
	})
}

// With the retry budget spent, a stream on a single upstream is not continued there.
func TestContinuationUnderASpentRetryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Stream("one ", "two ", "three").CutAfter(2), fake.Stream("one ", "two ", "three"))
		c := newClient(t, up("a", p), llmclient.WithRetryBudget(0, 0, time.Minute))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		text, err := readAll(s)
		assert.Equal(t, "one two ", text)
		assert.Equal(t, failure.StreamInterrupted, llmclient.ClassOf(err))
		assert.ErrorIs(t, err, llmclient.ErrRetryBudget)
		assert.Equal(t, 1, p.Calls())
	})
}

// A continuation runs within the call's time: past the deadline the stream ends, with
// the partial answer, and nothing is held.
func TestContinuationUnderASpentTimeBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Stream("one ", "two ", "three").StallAfter(2, time.Hour))
		b := fake.New(fake.Stream("one ", "two ", "three").StallFirst(time.Hour))
		c := newClient(t, up("a", a), up("b", b), llmclient.WithIdleTimeout(5*time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		defer cancel()
		s, err := c.Stream(ctx, chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		var text string
		d := elapsed(func() { text, err = readAll(s) })
		assert.Equal(t, 8*time.Second, d)
		assert.Equal(t, "one two ", text)
		require.Error(t, err)
		var e *llmclient.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, "one two ", e.Partial.Text)
		assert.True(t, errors.Is(err, llmclient.ErrIdleTimeout), "the interruption is in the cause: %v", err)
		assert.Equal(t, 0, c.InFlight("a")+c.InFlight("b"))
	})
}

// WithStreamContinuation(false) keeps the interruption as the stream's end.
func TestContinuationOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Stream("one ", "two ", "three").CutAfter(2))
		b := fake.New(fake.Stream("three"))
		c := newClient(t, up("a", a), up("b", b), llmclient.WithStreamContinuation(false))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		_, err = readAll(s)
		assert.Equal(t, failure.StreamInterrupted, llmclient.ClassOf(err))
		assert.Equal(t, 0, b.Calls())
	})
}

// Close during a continuation ends it; Err is nil, nothing is held.
func TestContinuationClosedByTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Stream("one ", "two ", "three").CutAfter(2))
		b := fake.New(fake.Stream("one ", "two ", "three").StallFirst(time.Hour))
		c := newClient(t, up("a", a), up("b", b))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		go func() {
			time.Sleep(time.Second)
			_ = s.Close()
		}()
		_, err = readAll(s)
		assert.NoError(t, err)
		synctest.Wait()
		assert.Equal(t, 0, c.InFlight("a")+c.InFlight("b"))
	})
}

// prefillFake is a fake provider whose models accept a prefill (dialect.Prefiller).
type prefillFake struct{ *fake.Provider }

func (prefillFake) AcceptsPrefill(string) bool { return true }

// The provider says whether its model accepts a prefill; WithPrefill overrides it.
func TestContinuationAsksTheProviderForPrefill(t *testing.T) {
	for _, override := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			a := fake.New(fake.Stream("one ", "two ", "three").CutAfter(2))
			b := fake.New(fake.Stream("one ", "two ", "three"))
			opts := []llmclient.Option{up("a", a), up("b", prefillFake{b})}
			if override {
				opts = append(opts, llmclient.WithPrefill("b", false))
			}
			c := newClient(t, opts...)
			s, err := c.Stream(context.Background(), chatReq("m"))
			require.NoError(t, err)
			defer s.Close()
			_, _ = readAll(s)
			want := llmclient.RoleAssistant
			if override {
				want = llmclient.RoleUser
			}
			assert.Equal(t, want, lastRole(b, 0))
		})
	}
}

// A stream that numbers its tool call by content block (Anthropic: text at 0, the call at
// 1) restarts on a fallback that numbers by call (OpenAI: 0): the restart's call is the
// delivered one, its rest keeps index 1, and a second call of the restart takes index 2,
// never merging into a delivered one.
func TestContinuationMatchesToolCallsAcrossNumberings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.StreamChunks(
			llmclient.Chunk{Text: "Let me look. "},
			llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 1, ID: "toolu_a", Name: "lookup", Arguments: `{"q":`}}},
			llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 1, Arguments: `"par`}}},
			llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 1, Arguments: `is"}`}}},
		).Finish(finish.ToolCalls).CutAfter(3))
		b := fake.New(fake.StreamChunks(
			llmclient.Chunk{Text: "Let me look. "},
			llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 0, ID: "call_b", Name: "lookup", Arguments: `{"q":"pa`}}},
			llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 0, Arguments: `ris"}`}}},
			llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 1, ID: "call_c", Name: "weather", Arguments: `{}`}}},
		).Finish(finish.ToolCalls))
		c := newClient(t, up("a", a), up("b", b))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		args := map[int]string{}
		for s.Next() {
			for _, d := range s.Current().ToolCalls {
				args[d.Index] += d.Arguments
			}
		}
		require.NoError(t, s.Err())
		assert.Equal(t, map[int]string{1: `{"q":"paris"}`, 2: `{}`}, args)
		resp := s.Response()
		require.Len(t, resp.ToolCalls, 2)
		assert.Equal(t, llmclient.ToolCall{ID: "toolu_a", Name: "lookup", Arguments: `{"q":"paris"}`}, resp.ToolCalls[0])
		assert.Equal(t, llmclient.ToolCall{ID: "call_c", Name: "weather", Arguments: `{}`}, resp.ToolCalls[1])
		assert.Equal(t, "Let me look. ", resp.Text)
	})
}

// A restart that begins a tool call while text the caller received is still unmatched,
// or ends (a finish reason) short of what the caller received, diverges at once: the
// caller gets none of its arguments and no finish reason, which would complete a call
// from an answer that never said what the caller read.
func TestContinuationRestartDivergesBeforeItsToolCallOrFinish(t *testing.T) {
	tool := func(id, name, args string) llmclient.Chunk {
		return llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 0, ID: id, Name: name, Arguments: args}}}
	}
	tests := []struct {
		name    string
		restart []llmclient.Chunk
		at      int
	}{
		{"a tool call before the delivered text", []llmclient.Chunk{tool("call_b", "f", `{"a":1}`)}, 0},
		{"a tool call within the delivered text", []llmclient.Chunk{{Text: "Let me"}, tool("call_b", "f", `{"a":1}`)}, 6},
		{"a finish reason within the delivered text", []llmclient.Chunk{{Text: "Let me"}}, 6},
		{"a finish reason within the delivered arguments", []llmclient.Chunk{{Text: "Let me call."}, tool("call_b", "f", `{"a`)}, 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := fake.New(fake.StreamChunks(
					llmclient.Chunk{Text: "Let me call."},
					tool("call_a", "f", `{"a":`),
					tool("", "", `1}`),
				).Finish(finish.ToolCalls).CutAfter(2))
				b := fake.New(fake.StreamChunks(tt.restart...).Finish(finish.ToolCalls))
				c := newClient(t, up("a", a), up("b", b))
				s, err := c.Stream(context.Background(), chatReq("m"))
				require.NoError(t, err)
				defer s.Close()
				var text, args string
				for s.Next() {
					ch := s.Current()
					text += ch.Text
					for _, d := range ch.ToolCalls {
						args += d.Arguments
					}
					assert.Equal(t, finish.None, ch.FinishReason, "no finish reason of the restart")
				}
				assert.Equal(t, "Let me call.", text)
				assert.Equal(t, `{"a":`, args, "nothing of the restart's arguments")
				err = s.Err()
				require.Error(t, err)
				assert.ErrorIs(t, err, llmclient.ErrContinuationDiverged)
				assert.Equal(t, failure.StreamInterrupted, llmclient.ClassOf(err))
				var de *llmclient.DivergedError
				require.ErrorAs(t, err, &de)
				assert.Equal(t, "Let me call.", de.Delivered)
				assert.Equal(t, tt.at, de.At)
				var e *llmclient.Error
				require.ErrorAs(t, err, &e)
				assert.Equal(t, "Let me call.", e.Partial.Text)
				assert.Equal(t, []llmclient.ToolCall{{ID: "call_a", Name: "f", Arguments: `{"a":`}}, e.Partial.ToolCalls)
				assert.Equal(t, finish.None, e.Partial.FinishReason)
				assert.Equal(t, 1, b.Calls())
				synctest.Wait()
				assert.Equal(t, 0, c.InFlight("a")+c.InFlight("b"))
			})
		})
	}
}
