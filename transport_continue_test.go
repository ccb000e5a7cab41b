package llmclient_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// oaiChunkOf is a chat.completion.chunk event of stream id with text.
func oaiChunkOf(id string, created int, text string) string {
	return `data: {"id":"` + id + `","object":"chat.completion.chunk","created":` + itoa(created) +
		`,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"` + text + `"},"finish_reason":null}]}` + "\n\n"
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// oaiStream is a whole chat completion stream of the given text pieces: a role chunk,
// the pieces, a finish chunk, a usage chunk and [DONE].
func oaiStream(id string, created int, in, out int, pieces ...string) []ev {
	head := `data: {"id":"` + id + `","object":"chat.completion.chunk","created":` + itoa(created) + `,"model":"gpt-4o","choices":[{"index":0,"delta":`
	evs := []ev{{0, head + `{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n"}}
	for _, p := range pieces {
		evs = append(evs, ev{0, oaiChunkOf(id, created, p)})
	}
	return append(evs,
		ev{0, head + `{},"finish_reason":"stop"}]}` + "\n\n"},
		ev{0, `data: {"id":"` + id + `","object":"chat.completion.chunk","created":` + itoa(created) +
			`,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":` + itoa(in) + `,"completion_tokens":` + itoa(out) +
			`,"total_tokens":` + itoa(in+out) + `}}` + "\n\n"},
		ev{0, done})
}

// oaiChunkJSON is what a test reads of a chat.completion.chunk.
type oaiChunkJSON struct {
	ID      string `json:"id"`
	Created int    `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		Prompt     int `json:"prompt_tokens"`
		Completion int `json:"completion_tokens"`
		Total      int `json:"total_tokens"`
	} `json:"usage"`
}

// oaiBody checks that body is one consistent chat completion stream and returns its text,
// usage chunk and finish reasons.
func oaiBody(t *testing.T, body string) (text string, usage *oaiChunkJSON) {
	t.Helper()
	events := strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n")
	require.NotEmpty(t, events)
	require.Equal(t, "data: [DONE]", events[len(events)-1], "one [DONE], last")
	roles, finishes := 0, 0
	for _, e := range events[:len(events)-1] {
		data, ok := strings.CutPrefix(e, "data: ")
		require.True(t, ok, "event %q", e)
		require.NotEqual(t, "[DONE]", data, "one [DONE]")
		var c oaiChunkJSON
		require.NoError(t, json.Unmarshal([]byte(data), &c), "event %q", e)
		assert.Equal(t, "s1", c.ID, "the first stream's id throughout")
		assert.Equal(t, 100, c.Created, "the first stream's created throughout")
		assert.Equal(t, "gpt-4o", c.Model)
		if c.Usage != nil {
			require.Nil(t, usage, "one usage chunk")
			usage = &c
		}
		for _, ch := range c.Choices {
			assert.Equal(t, 0, ch.Index)
			if ch.Delta.Role != "" {
				roles++
			}
			if ch.FinishReason != nil {
				finishes++
			}
			text += ch.Delta.Content
		}
	}
	assert.Equal(t, 1, roles, "one role delta")
	assert.Equal(t, 1, finishes, "one finish reason")
	return text, usage
}

// contPair is a Client with OpenAI upstreams a and b serving gpt-4o, a first.
func contPair(t *testing.T, a, b *script, opts ...llmclient.Option) (*llmclient.Client, http.RoundTripper) {
	t.Helper()
	opts = append([]llmclient.Option{oaiUpstream(t, "a", "http://a.test/v1"), oaiUpstream(t, "b", "http://b.test/v1"),
		llmclient.WithModelGroup("gpt-4o", "a", "b")}, opts...)
	c := newClient(t, opts...)
	return c, c.Transport(memTransport{hostMux{"a.test": a, "b.test": b}})
}

func TestTransportContinuesCutOpenAIStream(t *testing.T) {
	cut := oaiStream("s1", 100, 7, 99, "Hel", "lo")
	cut = cut[:3] // the role chunk, "Hel", "lo": then the connection ends
	tests := []struct {
		name    string
		a       []ev
		b       []ev
		prefill bool
		text    string
	}{
		{"restart and splice", cut, oaiStream("s2", 200, 7, 3, "Hel", "lo", " world"), false, "Hello world"},
		{"restart and splice at a different cut", cut, oaiStream("s2", 200, 7, 3, "H", "ello w", "orld"), false, "Hello world"},
		{"prefill", cut, oaiStream("s2", 200, 9, 1, " world"), true, "Hello world"},
		{"in-band error event", append(cut[:3:3], ev{0, `data: {"error":{"message":"overloaded","type":"server_error","code":"server_is_overloaded"}}` + "\n\n"}),
			oaiStream("s2", 200, 7, 3, "Hello", " world"), false, "Hello world"},
		{"cut inside an event", append(cut[:3:3], ev{0, `data: {"id":"s1","object":"chat.comp`}),
			oaiStream("s2", 200, 7, 3, "Hello", " world"), false, "Hello world"},
		{"stall past the idle timeout", append(cut[:3:3], ev{-1, ""}), oaiStream("s2", 200, 7, 3, "Hello", " world"), false, "Hello world"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b := newScript(sseStep(tt.a...)), newScript(sseStep(tt.b...))
				var log eventLog
				c, rt := contPair(t, a, b, llmclient.WithObserver(log.observe), llmclient.WithPrefill("b", tt.prefill),
					llmclient.WithIdleTimeout(10*time.Second))
				resp, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions",
					`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
				require.NoError(t, err)
				body, err := readBody(t, resp)
				require.NoError(t, err)
				text, usage := oaiBody(t, body)
				assert.Equal(t, tt.text, text, "whole, nothing repeated")
				require.NotNil(t, usage)
				assert.Greater(t, usage.Usage.Prompt, 7, "summed over both attempts: the first's estimate and the second's report")
				synctest.Wait()
				assert.Equal(t, 0, c.InFlight("a")+c.InFlight("b"))
				conts := log.kinds(event.Continuation)
				require.Len(t, conts, 1)
				assert.Equal(t, "b", conts[0].Target)
				want := "restart"
				if tt.prefill {
					want = "prefill"
				}
				assert.Equal(t, want, conts[0].Action)
				got := b.requests()
				require.Len(t, got, 1)
				if tt.prefill {
					assert.Contains(t, got[0].Body, `{"role":"assistant","content":"Hello"}]`, "the partial answer as a prefill")
				} else {
					assert.NotContains(t, got[0].Body, `"assistant"`)
				}
				calls := log.kinds(event.Call)
				require.Len(t, calls, 1, "one call")
				assert.NoError(t, calls[0].Err)
			})
		})
	}
}

// readDiverged streams a chat call through rt and reads its body, which must fail as a
// diverged continuation; it returns what the body delivered.
func readDiverged(t *testing.T, rt http.RoundTripper) string {
	t.Helper()
	resp, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions", streamBody)
	require.NoError(t, err)
	body, err := readBody(t, resp)
	require.Error(t, err)
	assert.ErrorIs(t, err, llmclient.ErrContinuationDiverged)
	assert.Equal(t, failure.StreamInterrupted, llmclient.ClassOf(err))
	return body
}

func TestTransportContinuationDivergesWithAClearError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newScript(sseStep(oaiStream("s1", 100, 7, 9, "Hel", "lo")[:3]...))
		b := newScript(sseStep(oaiStream("s2", 200, 7, 3, "Goodbye")...))
		c, rt := contPair(t, a, b)
		body := readDiverged(t, rt)
		assert.NotContains(t, body, "Goodbye", "nothing of the diverging answer")
		assert.Equal(t, 1, strings.Count(body, `"content":"lo"`))
		assert.NotContains(t, body, "[DONE]")
		synctest.Wait()
		assert.Equal(t, 0, c.InFlight("a")+c.InFlight("b"))
	})
}

func TestTransportContinuationOffEndsTheBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first := oaiStream("s1", 100, 7, 9, "Hel", "lo")[:3]
		a := newScript(sseStep(first...))
		b := newScript(sseStep(oaiStream("s2", 200, 7, 3, "Hello", " world")...))
		_, rt := contPair(t, a, b, llmclient.WithStreamContinuation(false))
		resp, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions", streamBody)
		require.NoError(t, err)
		body, err := readBody(t, resp)
		assert.ErrorIs(t, err, llmclient.ErrStreamInterrupted)
		assert.Equal(t, first[0].data+first[1].data+first[2].data, body, "the first stream byte for byte, then the error")
		assert.Zero(t, b.count())
	})
}

// antEvent is one Anthropic stream event.
func antEvent(name, data string) ev { return ev{0, "event: " + name + "\ndata: " + data + "\n\n"} }

func antStream(id string, in, out int, pieces ...string) []ev {
	evs := []ev{
		antEvent("message_start", `{"type":"message_start","message":{"id":"`+id+`","type":"message","role":"assistant","content":[],"model":"claude-3-7-sonnet","usage":{"input_tokens":`+itoa(in)+`,"output_tokens":1}}}`),
		antEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
		{0, "event: ping\ndata: {\"type\":\"ping\"}\n\n"},
	}
	for _, p := range pieces {
		evs = append(evs, antEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+p+`"}}`))
	}
	return append(evs,
		antEvent("content_block_stop", `{"type":"content_block_stop","index":0}`),
		antEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":`+itoa(out)+`}}`),
		antEvent("message_stop", `{"type":"message_stop"}`))
}

func TestTransportContinuesCutAnthropicStream(t *testing.T) {
	for _, prefill := range []bool{false, true} {
		t.Run(map[bool]string{false: "restart and splice", true: "prefill"}[prefill], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newScript(sseStep(antStream("msg_1", 10, 20, "Hel", "lo")[:5]...))
				second := antStream("msg_2", 10, 5, "Hel", "lo", " world")
				if prefill {
					second = antStream("msg_2", 12, 2, " world")
				}
				b := newScript(sseStep(second...))
				var ups []llmclient.Option
				for _, name := range []string{"a", "b"} {
					p, err := anthropic.New(anthropic.WithBaseURL("http://" + name + ".test"))
					require.NoError(t, err)
					ups = append(ups, llmclient.WithUpstream(llmclient.Upstream{Name: name, Provider: p}))
				}
				var log eventLog
				c := newClient(t, append(ups, llmclient.WithModelGroup("claude-3-7-sonnet", "a", "b"),
					llmclient.WithPrefill("b", prefill), llmclient.WithObserver(log.observe))...)
				rt := c.Transport(memTransport{hostMux{"a.test": a, "b.test": b}})
				resp, err := post(t, context.Background(), rt, "http://a.test/v1/messages",
					`{"model":"claude-3-7-sonnet","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
				require.NoError(t, err)
				body, err := readBody(t, resp)
				require.NoError(t, err)
				counts := map[string]int{}
				var text string
				var delta struct {
					Usage struct {
						InputTokens  int `json:"input_tokens"`
						OutputTokens int `json:"output_tokens"`
					} `json:"usage"`
				}
				for _, e := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
					name, data, ok := strings.Cut(strings.TrimPrefix(e, "event: "), "\ndata: ")
					require.True(t, ok, "event %q", e)
					counts[name]++
					var v struct {
						Index int `json:"index"`
						Delta struct {
							Text string `json:"text"`
						} `json:"delta"`
					}
					require.NoError(t, json.Unmarshal([]byte(data), &v), "event %q", e)
					switch name {
					case "content_block_delta":
						assert.Equal(t, 0, v.Index, "the spliced text continues block 0")
						text += v.Delta.Text
					case "message_delta":
						require.NoError(t, json.Unmarshal([]byte(data), &delta))
					}
				}
				assert.Equal(t, "Hello world", text)
				assert.Equal(t, 1, counts["message_start"])
				assert.Equal(t, 1, counts["content_block_start"])
				assert.Equal(t, 1, counts["content_block_stop"])
				assert.Equal(t, 1, counts["message_delta"])
				assert.Equal(t, 1, counts["message_stop"])
				assert.Greater(t, delta.Usage.OutputTokens, 2, "summed over both attempts")
				assert.Greater(t, delta.Usage.InputTokens, 10, "summed over both attempts")
				synctest.Wait()
				assert.Equal(t, 0, c.InFlight("a")+c.InFlight("b"))
				require.Len(t, log.kinds(event.Continuation), 1)
			})
		})
	}
}

func TestTransportContinuesToolCallsAcrossTheSplice(t *testing.T) {
	t.Run("openai", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			tool := func(id, delta string) string {
				return `data: {"id":"` + id + `","object":"chat.completion.chunk","created":100,"model":"gpt-4o","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"
			}
			a := newScript(sseStep(
				ev{0, tool("s1", `{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}`)},
				ev{0, tool("s1", `{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`)}))
			b := newScript(sseStep(
				ev{0, tool("s2", `{"role":"assistant","tool_calls":[{"index":0,"id":"call_9","type":"function","function":{"name":"get_weather","arguments":""}}]}`)},
				ev{0, tool("s2", `{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Pa"}}]}`)},
				ev{0, tool("s2", `{"tool_calls":[{"index":0,"function":{"arguments":"ris\"}"}}]}`)},
				ev{0, `data: {"id":"s2","object":"chat.completion.chunk","created":100,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n"},
				ev{0, done}))
			_, rt := contPair(t, a, b)
			resp, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions", streamBody)
			require.NoError(t, err)
			body, err := readBody(t, resp)
			require.NoError(t, err)
			var ids, args, finish string
			for _, e := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
				data := strings.TrimPrefix(e, "data: ")
				if data == "[DONE]" {
					continue
				}
				var c struct {
					ID      string `json:"id"`
					Choices []struct {
						Index int `json:"index"`
						Delta struct {
							ToolCalls []struct {
								Index    int    `json:"index"`
								ID       string `json:"id"`
								Function struct {
									Arguments string `json:"arguments"`
								} `json:"function"`
							} `json:"tool_calls"`
						} `json:"delta"`
						FinishReason *string `json:"finish_reason"`
					} `json:"choices"`
				}
				require.NoError(t, json.Unmarshal([]byte(data), &c), "event %q", e)
				assert.Equal(t, "s1", c.ID)
				for _, ch := range c.Choices {
					for _, tc := range ch.Delta.ToolCalls {
						assert.Equal(t, 0, tc.Index)
						ids += tc.ID
						args += tc.Function.Arguments
					}
					if ch.FinishReason != nil {
						finish += *ch.FinishReason
					}
				}
			}
			assert.Equal(t, "call_1", ids, "the first attempt's id, once")
			assert.Equal(t, `{"city":"Paris"}`, args)
			assert.Equal(t, "tool_calls", finish)
		})
	})
	t.Run("anthropic", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			head := []ev{
				antEvent("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-3-7-sonnet","usage":{"input_tokens":10,"output_tokens":1}}}`),
				antEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
				antEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Checking."}}`),
				antEvent("content_block_stop", `{"type":"content_block_stop","index":0}`),
				antEvent("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`),
				antEvent("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`),
			}
			a := newScript(sseStep(head...))
			rest := append(append([]ev{}, head[:5]...),
				antEvent("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\":\"Paris\"}"}}`),
				antEvent("content_block_stop", `{"type":"content_block_stop","index":1}`),
				antEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":20}}`),
				antEvent("message_stop", `{"type":"message_stop"}`))
			b := newScript(sseStep(rest...))
			var ups []llmclient.Option
			for _, name := range []string{"a", "b"} {
				p, err := anthropic.New(anthropic.WithBaseURL("http://" + name + ".test"))
				require.NoError(t, err)
				ups = append(ups, llmclient.WithUpstream(llmclient.Upstream{Name: name, Provider: p}))
			}
			c := newClient(t, append(ups, llmclient.WithModelGroup("claude-3-7-sonnet", "a", "b"))...)
			rt := c.Transport(memTransport{hostMux{"a.test": a, "b.test": b}})
			resp, err := post(t, context.Background(), rt, "http://a.test/v1/messages",
				`{"model":"claude-3-7-sonnet","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"weather?"}]}`)
			require.NoError(t, err)
			body, err := readBody(t, resp)
			require.NoError(t, err)
			var starts []int
			var json1, stop string
			for _, e := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
				name, data, _ := strings.Cut(strings.TrimPrefix(e, "event: "), "\ndata: ")
				var v struct {
					Index int `json:"index"`
					Delta struct {
						PartialJSON string `json:"partial_json"`
						StopReason  string `json:"stop_reason"`
					} `json:"delta"`
				}
				require.NoError(t, json.Unmarshal([]byte(data), &v), "event %q", e)
				switch name {
				case "content_block_start":
					starts = append(starts, v.Index)
				case "content_block_delta":
					if v.Index == 1 {
						json1 += v.Delta.PartialJSON
					}
				case "message_delta":
					stop = v.Delta.StopReason
				}
			}
			assert.Equal(t, []int{0, 1}, starts, "no block started twice")
			assert.Equal(t, `{"city":"Paris"}`, json1, "the tool's input continues its block")
			assert.Equal(t, "tool_use", stop)
		})
	})
}

// A restart that begins a tool call while text the caller received is still unmatched
// diverges at once: the body holds the first stream as it was, and nothing of the
// restart's arguments or finish reason.
func TestTransportContinuationToolCallBeforeTheDeliveredTextDiverges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tool := func(id, delta, finish string) ev {
			return ev{0, `data: {"id":"` + id + `","object":"chat.completion.chunk","created":100,"model":"gpt-4o","choices":[{"index":0,"delta":` +
				delta + `,"finish_reason":` + finish + `}]}` + "\n\n"}
		}
		first := []ev{
			tool("s1", `{"role":"assistant","content":"Let me call."}`, "null"),
			tool("s1", `{"tool_calls":[{"index":0,"id":"call_x","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]}`, "null"),
		} // then the connection ends
		a := newScript(sseStep(first...))
		b := newScript(sseStep(
			tool("s2", `{"role":"assistant","tool_calls":[{"index":0,"id":"call_y","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}`, "null"),
			tool("s2", `{}`, `"tool_calls"`),
			ev{0, done}))
		c, rt := contPair(t, a, b)
		body := readDiverged(t, rt)
		assert.Equal(t, first[0].data+first[1].data, body, "the first stream as it was, nothing of the restart")
		assert.Equal(t, 1, b.count())
		synctest.Wait()
		assert.Equal(t, 0, c.InFlight("a")+c.InFlight("b"))
	})
}
