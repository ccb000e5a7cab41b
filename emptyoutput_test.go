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

func TestEmptyOutputRetriedOnceWithLargerBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("").Reasoning("thinking hard...").Finish(finish.Length), fake.Reply("42"))
		c := newClient(t, up("a", p))
		req := chatReq("m")
		req.MaxTokens = 500
		resp, err := c.Complete(context.Background(), req)
		require.NoError(t, err)
		assert.Equal(t, "42", resp.Text)
		require.Len(t, resp.Attempts, 2)
		assert.Equal(t, failure.EmptyOutput, resp.Attempts[0].Class)
		assert.Equal(t, 500, p.Requests()[0].Request.MaxTokens)
		assert.Equal(t, 1000, p.Requests()[1].Request.MaxTokens, "the retry gets twice the output budget")
		assert.Equal(t, 500, req.MaxTokens, "the caller's request is not modified")

		// Only once.
		p = fake.New(fake.Reply("").Reasoning("...").Forever())
		c = newClient(t, up("a", p))
		_, err = c.Complete(context.Background(), chatReq("m"))
		assert.Equal(t, failure.EmptyOutput, llmclient.ClassOf(err))
		assert.Equal(t, 2, p.Calls())
	})
}

func TestStreamWithoutContentIsRetriedBeforeCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Hidden reasoning used the whole budget: the stream ends with finish_reason length
		// and no content token, so it never committed and is retried invisibly.
		p := fake.New(fake.StreamChunks().Finish(finish.Length), fake.Stream("an ", "answer"))
		c := newClient(t, up("a", p))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		text, err := readAll(s)
		require.NoError(t, err)
		assert.Equal(t, "an answer", text)
		assert.Equal(t, 4096, p.Requests()[1].Request.MaxTokens, "a request without MaxTokens gets 4096 on the retry")
	})
}

func TestStreamFallbackFunctionAnswersAsAStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Fail(500).Forever())
		c := newClient(t, up("a", p), llmclient.WithMaxAttempts(1),
			llmclient.WithFallback(func(context.Context, *llmclient.Request, error) (*llmclient.Response, error) {
				return &llmclient.Response{Text: "cached", FinishReason: finish.Stop}, nil
			}))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		text, err := readAll(s)
		require.NoError(t, err)
		assert.Equal(t, "cached", text)
		assert.True(t, s.Response().Degraded)
	})
}

// A tool-call delta that carries nothing (no id, name or arguments) is no answer: a stream
// of reasoning and such a delta ends as an empty answer, whether the stream keeps its
// content or not.
func TestStreamEmptyToolCallDeltaIsNoAnswer(t *testing.T) {
	for _, keep := range []bool{true, false} {
		t.Run(map[bool]string{true: "accumulated", false: "not accumulated"}[keep], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := fake.New(fake.StreamChunks(
					llmclient.Chunk{Reasoning: "thinking..."},
					llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 0}}},
				).Finish(finish.Length))
				c := newClient(t, up("a", p), llmclient.WithStreamAccumulate(keep))
				s, err := c.Stream(context.Background(), chatReq("m"))
				require.NoError(t, err)
				defer s.Close()
				_, err = readAll(s)
				assert.Equal(t, failure.EmptyOutput, llmclient.ClassOf(err), "%v", err)
			})
		})
	}
}
