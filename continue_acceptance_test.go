package llmclient_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Across a restart's splice the reasoning stays consistent: the restart's reasoning, which
// the caller already has, is not delivered again; the text goes on where it stopped; the
// finish reason arrives once, the restart's.
func TestContinuationKeepsReasoningAcrossASplice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.StreamChunks(thinking("plan "), thinking("it"), answer("one "), answer("two "), answer("three")).CutAfter(4))
		b := fake.New(fake.StreamChunks(thinking("plan "), thinking("it"), answer("one two "), answer("three")).Finish(finish.Length))
		c := newClient(t, up("a", a), up("b", b))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		var reasoning, text string
		finishes := 0
		for s.Next() {
			ch := s.Current()
			reasoning += ch.Reasoning
			text += ch.Text
			if ch.FinishReason != finish.None {
				finishes++
				assert.Equal(t, finish.Length, ch.FinishReason)
			}
		}
		require.NoError(t, s.Err())
		assert.Equal(t, "plan it", reasoning, "the reasoning once")
		assert.Equal(t, "one two three", text)
		assert.Equal(t, 1, finishes)
		resp := s.Response()
		assert.Equal(t, "plan it", resp.Reasoning)
		assert.Equal(t, "one two three", resp.Text)
		assert.Equal(t, finish.Length, resp.FinishReason)
	})
}

// A continued stream's cost is the sum of its attempts' costs, the broken one included.
func TestContinuationSumsTheCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Stream("one ", "two ", "three").Usage(1000, 300).CutAfter(2))
		b := fake.New(fake.Stream("one ", "two ", "three").Usage(1000, 500))
		c := newClient(t,
			llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: a, PriceProvider: "openai"}),
			llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: b, PriceProvider: "openai"}),
			llmclient.WithPricing(nil))
		s, err := c.Stream(context.Background(), chatReq("gpt-4o-mini"))
		require.NoError(t, err)
		defer s.Close()
		_, err = readAll(s)
		require.NoError(t, err)
		resp := s.Response()
		require.Len(t, resp.Attempts, 2)
		first, second := resp.Attempts[0].Cost, resp.Attempts[1].Cost
		require.True(t, first.Known && second.Known)
		assert.Positive(t, int64(first.Amount))
		assert.True(t, resp.Cost.Known)
		assert.Equal(t, first.Amount+second.Amount, resp.Cost.Amount)
		assert.Equal(t, resp.Attempts[0].Usage.InputTokens+1000, resp.Usage.InputTokens, "the cut attempt's estimate and the second's usage")
		assert.True(t, resp.Attempts[0].Usage.Estimated, "the cut attempt reported no usage")
	})
}

// Under a call budget (WithCallBudget) that the stream spent before it broke, the
// continuation gets the budget anew, and only that: a fallback that never starts is cut
// within it, and the stream ends with the interruption and the partial answer.
func TestContinuationUnderASpentCallBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Stream("one ", "two ", "three").ChunkDelay(20 * time.Second).CutAfter(2))
		b := fake.New(fake.Stream("one ", "two ", "three").StallFirst(time.Hour))
		c := newClient(t, up("a", a), up("b", b), llmclient.WithCallBudget(15*time.Second))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		var text string
		d := elapsed(func() { text, err = readAll(s) })
		assert.Equal(t, "one two ", text)
		require.Error(t, err)
		var e *llmclient.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, "one two ", e.Partial.Text)
		// The cut comes at 40 s (a chunk every 20 s), long past the budget; the
		// continuation then has 15 s, less the budget's margin.
		assert.Greater(t, d, 40*time.Second+10*time.Second, "the continuation had a budget anew")
		assert.LessOrEqual(t, d, 40*time.Second+15*time.Second, "and no more")
		assert.Equal(t, 1, b.Calls())
		assert.Equal(t, 0, c.InFlight("a")+c.InFlight("b"))
	})
}
