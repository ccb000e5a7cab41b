package llmclient_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func refusalChunk(s string) llmclient.Chunk { return llmclient.Chunk{Refusal: s} }

// A stream whose caller received text and then a refusal is not continued by a prefill,
// even where the target accepts one: the prefill would send the text alone, and the model
// would go on from it as if it had not refused. It restarts there instead, and the splice
// checks the refusal as it checks the text.
func TestContinuationDoesNotPrefillADeliveredRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.StreamChunks(answer("Sure, "), refusalChunk("I can"), refusalChunk("'t.")).CutAfter(2))
		b := fake.New(fake.StreamChunks(answer("Sure, "), refusalChunk("I can't.")).Finish(finish.Refusal))
		var log eventLog
		c := newClient(t, up("a", a), up("b", b), llmclient.WithPrefill("b", true), llmclient.WithObserver(log.observe))
		s, err := c.Stream(context.Background(), chatReq("m"))
		require.NoError(t, err)
		defer s.Close()
		var text, refused string
		for s.Next() {
			text += s.Current().Text
			refused += s.Current().Refusal
		}
		assert.Equal(t, "Sure, ", text, "the text once")
		assert.Equal(t, "I can't.", refused, "the refusal once, whole")
		assert.Equal(t, failure.ContentFiltered, llmclient.ClassOf(s.Err()), "a refusal, not a divergence")
		assert.NotErrorIs(t, s.Err(), llmclient.ErrContinuationDiverged)
		require.Equal(t, 1, b.Calls())
		assert.Equal(t, llmclient.RoleUser, lastRole(b, 0), "no prefill: the request as it was")
		cont := log.kinds(event.Continuation)
		require.Len(t, cont, 1)
		assert.Equal(t, "restart", cont[0].Action)
		synctest.Wait()
		assert.Equal(t, 0, c.InFlight("a")+c.InFlight("b"))
	})
}

// The Transport decides as Client.Stream does: an OpenAI stream cut after text and a
// refusal restarts on a prefill-capable fallback, whose request carries no assistant
// message, and the body holds the text and the refusal once.
func TestTransportContinuationDoesNotPrefillADeliveredRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first := []ev{oaiDelta("s1", `{"role":"assistant","content":""}`, "null"), oaiDelta("s1", `{"content":"Sure, "}`, "null"),
			oaiDelta("s1", `{"refusal":"I can"}`, "null")}
		restart := []ev{oaiDelta("s2", `{"role":"assistant","content":"Sure, "}`, "null"), oaiDelta("s2", `{"refusal":"I can't."}`, "null"),
			oaiDelta("s2", `{}`, `"stop"`), {0, done}}
		a, b := newScript(sseStep(first...)), newScript(sseStep(restart...))
		var log eventLog
		c, rt := contPair(t, a, b, llmclient.WithPrefill("b", true), llmclient.WithObserver(log.observe))
		resp, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions", streamBody)
		require.NoError(t, err)
		body, err := readBody(t, resp)
		require.NoError(t, err)
		text, refusal, _ := oaiDeltas(t, body)
		assert.Equal(t, "Sure, ", text)
		assert.Equal(t, "I can't.", refusal)
		got := b.requests()
		require.Len(t, got, 1)
		assert.NotContains(t, got[0].Body, `"assistant"`, "no prefill")
		cont := log.kinds(event.Continuation)
		require.Len(t, cont, 1)
		assert.Equal(t, "restart", cont[0].Action)
		synctest.Wait()
		assert.Equal(t, 0, c.InFlight("a")+c.InFlight("b"))
	})
}

// ContinuationRequest sends back what the caller received, its refusal included: as a
// text part after the text (a Message holds no refusal of its own), so that a refusal
// alone is continued too rather than dropped.
func TestContinuationRequestSendsTheRefusal(t *testing.T) {
	req := chatReq("m")
	tests := []struct {
		name    string
		partial llmclient.Response
		parts   []string
	}{
		{"text and a refusal", llmclient.Response{Text: "Sure, ", Refusal: "I can't."}, []string{"Sure, ", "I can't."}},
		{"a refusal alone", llmclient.Response{Refusal: "I can"}, []string{"I can"}},
		{"text alone", llmclient.Response{Text: "Sure, "}, []string{"Sure, "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := error(&llmclient.Error{Class: failure.StreamInterrupted, Partial: &tt.partial})
			cont := llmclient.ContinuationRequest(req, errors.Join(errors.New("wrapped"), err))
			require.NotNil(t, cont)
			require.Len(t, cont.Messages, len(req.Messages)+1)
			last := cont.Messages[len(cont.Messages)-1]
			assert.Equal(t, llmclient.RoleAssistant, last.Role)
			var parts []string
			for _, p := range last.Content {
				assert.Equal(t, llmclient.PartText, p.Type)
				parts = append(parts, p.Text)
			}
			assert.Equal(t, tt.parts, parts)
			assert.Len(t, req.Messages, 1, "the request given is not changed")
		})
	}
}
