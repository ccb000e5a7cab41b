package llmclient_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/llmclient/llmclient/provider/gemini"
	"github.com/llmclient/llmclient/provider/openai"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A malformed event in an otherwise healthy Anthropic, Gemini or OpenAI Responses API stream is skipped: the
// stream completes where it is, and the attempt's notes count what was skipped.
func TestStreamSkipsAMalformedEventVendors(t *testing.T) {
	named := func(name, data string) ev { return ev{0, "event: " + name + "\ndata: " + data + "\n\n"} }
	antText := func(s string) ev {
		return named("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+s+`"}}`)
	}
	gemText := func(s, finish string) ev {
		return ev{0, `data: {"candidates":[{"content":{"parts":[{"text":"` + s + `"}],"role":"model"}` + finish + `,"index":0}],"modelVersion":"gemini-2.5-flash","responseId":"r-1"}` + "\n\n"}
	}
	cases := []struct {
		name   string
		model  string
		events []ev
		new    func(hc *http.Client) (llmclient.Provider, error)
	}{
		{"anthropic", "claude-opus-4-6", []ev{
			named("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-opus-4-6","usage":{"input_tokens":5,"output_tokens":1}}}`),
			named("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
			antText("Hel"),
			named("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`),
			antText("lo"),
			named("content_block_stop", `{"type":"content_block_stop","index":0}`),
			named("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`),
			named("message_stop", `{"type":"message_stop"}`),
		}, func(hc *http.Client) (llmclient.Provider, error) {
			return anthropic.New(anthropic.WithBaseURL("http://ant.test"), anthropic.WithAPIKey("k"), anthropic.WithHTTPClient(hc))
		}},
		{"gemini", "gemini-2.5-flash", []ev{
			gemText("Hel", ""),
			{0, `data: {"candidates":[{"content":{"parts":[{"text":` + "\n\n"},
			gemText("lo", `,"finishReason":"STOP"`),
		}, func(hc *http.Client) (llmclient.Provider, error) {
			return gemini.New(gemini.WithBaseURL("http://gem.test"), gemini.WithAPIKey("k"), gemini.WithHTTPClient(hc))
		}},
	}
	respText := func(s string) ev {
		return named("response.output_text.delta", `{"type":"response.output_text.delta","delta":"`+s+`"}`)
	}
	cases = append(cases, struct {
		name   string
		model  string
		events []ev
		new    func(hc *http.Client) (llmclient.Provider, error)
	}{"openai responses", "gpt-4o", []ev{
		named("response.created", `{"type":"response.created","response":{"id":"r1","model":"gpt-4o"}}`),
		respText("Hel"),
		named("response.output_text.delta", `{"type":"response.output_text.delta","delta":"x`),
		respText("lo"),
		named("response.completed", `{"type":"response.completed","response":{"id":"r1","model":"gpt-4o","status":"completed","usage":{"input_tokens":3,"output_tokens":2,"total_tokens":5}}}`),
	}, func(hc *http.Client) (llmclient.Provider, error) {
		return openai.New(openai.WithBaseURL("http://oai.test/v1"), openai.WithResponsesAPI(), openai.WithHTTPClient(hc))
	}})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := newScript(sseStep(tc.events...))
				p, err := tc.new(&http.Client{Transport: memTransport{h: srv}})
				require.NoError(t, err)
				c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: tc.name, Provider: p}))
				s, err := c.Stream(context.Background(), chatReq(tc.model))
				require.NoError(t, err)
				defer s.Close()
				text, err := readAll(s)
				require.NoError(t, err)
				assert.Equal(t, "Hello", text)
				assert.Equal(t, 1, srv.count(), "recovered in place")
				require.Len(t, s.Response().Attempts, 1)
				assert.True(t, strings.Contains(strings.Join(s.Response().Attempts[0].Notes, ";"), "skipped 1 malformed stream events"))
			})
		})
	}
}
