package openai

import (
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/internal/jsonscan"
	"github.com/llmclient/llmclient/internal/providertest"
	"github.com/llmclient/llmclient/internal/sse"
)

// streamOf returns a chunk stream over an in-memory body.
func streamOf(body io.Reader) llmclient.ProviderStream {
	return newChunkStream(&http.Response{
		StatusCode: 200,
		Header:     http.Header{"Content-Type": {"text/event-stream"}, "X-Request-Id": {"req_123"}},
		Body:       io.NopCloser(body),
	})
}

// maxChunks bounds the chunks a test stream may yield before it counts as endless.
const maxChunks = 1_000_000

// ev formats one SSE data event.
func ev(data string) string { return "data: " + data + "\n\n" }

const (
	done = "data: [DONE]\n\n"
	// Shapes from the Chat Completions streaming reference.
	roleChunk    = `{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]}`
	helloChunk   = `{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}`
	worldChunk   = `{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":" wörld\n\"ok\" \u00e9\ud83d\ude00"},"logprobs":null,"finish_reason":null}]}`
	stopChunk    = `{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`
	usageChunk   = `{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":4,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":3,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`
	azureFilter  = `{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}}]}`
	azureContent = `{"choices":[{"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}},"delta":{"content":"Hi"},"finish_reason":null,"index":0,"logprobs":null}],"created":1712345678,"id":"chatcmpl-az","model":"gpt-4o-2024-05-13","object":"chat.completion.chunk","system_fingerprint":"fp_abc"}`
	azureEndCF   = `{"choices":[{"content_filter_offsets":{"check_offset":0,"start_offset":0,"end_offset":2},"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}},"finish_reason":null,"index":0}],"created":0,"id":"","model":"","object":""}`
	azureStop    = `{"choices":[{"content_filter_results":{},"delta":{},"finish_reason":"stop","index":0,"logprobs":null}],"created":1712345678,"id":"chatcmpl-az","model":"gpt-4o-2024-05-13","object":"chat.completion.chunk","system_fingerprint":"fp_abc"}`
)

func meta(c llmclient.Chunk) llmclient.Chunk {
	c.ID, c.Model = "chatcmpl-123", "gpt-4o-mini"
	return c
}

func TestChunkStreamDecodes(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []llmclient.Chunk
	}{
		{
			name: "content",
			in:   ev(roleChunk) + ev(helloChunk) + ev(worldChunk) + ev(stopChunk) + ev(usageChunk) + done,
			want: []llmclient.Chunk{
				meta(llmclient.Chunk{}),
				meta(llmclient.Chunk{Text: "Hello"}),
				meta(llmclient.Chunk{Text: " wörld\n\"ok\" é😀"}),
				meta(llmclient.Chunk{FinishReason: finish.Stop, RawFinishReason: "stop"}),
				meta(llmclient.Chunk{Usage: &llmclient.Usage{InputTokens: 9, OutputTokens: 12, TotalTokens: 21, CachedInputTokens: 4, ReasoningTokens: 3}}),
			},
		},
		{
			name: "tool call deltas across chunks",
			in: ev(`{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"get_current_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}]}`) +
				ev(`{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\""}}]},"logprobs":null,"finish_reason":null}]}`) +
				ev(`{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"location\":\"Boston\"}"}}]},"logprobs":null,"finish_reason":null}]}`) +
				ev(`{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"get_time","arguments":"{}"}}]},"logprobs":null,"finish_reason":null}]}`) +
				ev(`{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}`) +
				done,
			want: []llmclient.Chunk{
				meta(llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 0, ID: "call_DdmO9pD3xa9XTPNJ32zg2hcA", Name: "get_current_weather"}}}),
				meta(llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 0, Arguments: `{"`}}}),
				meta(llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 0, Arguments: `location":"Boston"}`}}}),
				meta(llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 1, ID: "call_2", Name: "get_time", Arguments: "{}"}}}),
				meta(llmclient.Chunk{FinishReason: finish.ToolCalls, RawFinishReason: "tool_calls"}),
			},
		},
		{
			name: "tool calls without index take their position; arguments as an object",
			in:   ev(`{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":{"x": [1, 2]}}},{"id":"b","function":{"name":"g"}}]}}]}`) + done,
			want: []llmclient.Chunk{{ToolCalls: []dialect.ToolCallDelta{{Index: 0, ID: "a", Name: "f", Arguments: `{"x": [1, 2]}`}, {Index: 1, ID: "b", Name: "g"}}}},
		},
		{
			name: "legacy function_call",
			in: ev(`{"choices":[{"index":0,"delta":{"function_call":{"name":"f","arguments":""}}}]}`) +
				ev(`{"choices":[{"index":0,"delta":{"function_call":{"arguments":"{}"}}}]}`) +
				ev(`{"choices":[{"index":0,"delta":{},"finish_reason":"function_call"}]}`) + done,
			want: []llmclient.Chunk{
				{ToolCalls: []dialect.ToolCallDelta{{Name: "f"}}},
				{ToolCalls: []dialect.ToolCallDelta{{Arguments: "{}"}}},
				{FinishReason: finish.ToolCalls, RawFinishReason: "function_call"},
			},
		},
		{
			name: "reasoning_content (DeepSeek) and reasoning (vLLM, OpenRouter)",
			in: ev(`{"id":"d1","model":"deepseek-reasoner","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":"Let me think"},"finish_reason":null}]}`) +
				ev(`{"id":"d1","model":"deepseek-reasoner","choices":[{"index":0,"delta":{"content":null,"reasoning":"more"},"finish_reason":null}]}`) +
				ev(`{"id":"d1","model":"deepseek-reasoner","choices":[{"index":0,"delta":{"reasoning":"dup","reasoning_content":"first"},"finish_reason":null}]}`) +
				ev(`{"id":"d1","model":"deepseek-reasoner","choices":[{"index":0,"delta":{"content":"Answer","reasoning_content":null},"finish_reason":null}]}`) +
				ev(`{"id":"d1","model":"deepseek-reasoner","choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30,"prompt_cache_hit_tokens":6,"prompt_cache_miss_tokens":4,"completion_tokens_details":{"reasoning_tokens":15}}}`) +
				done,
			want: []llmclient.Chunk{
				{ID: "d1", Model: "deepseek-reasoner", Reasoning: "Let me think"},
				{ID: "d1", Model: "deepseek-reasoner", Reasoning: "more"},
				{ID: "d1", Model: "deepseek-reasoner", Reasoning: "first"},
				{ID: "d1", Model: "deepseek-reasoner", Text: "Answer"},
				{ID: "d1", Model: "deepseek-reasoner", FinishReason: finish.Stop, RawFinishReason: "stop",
					Usage: &llmclient.Usage{InputTokens: 10, OutputTokens: 20, TotalTokens: 30, CachedInputTokens: 6, ReasoningTokens: 15}},
			},
		},
		{
			name: "refusal ends as FinishRefusal",
			in: ev(`{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""}}]}`) +
				ev(`{"choices":[{"index":0,"delta":{"refusal":"I can't help with that."}}]}`) +
				ev(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`) + done,
			want: []llmclient.Chunk{
				{Refusal: "I can't help with that."},
				{FinishReason: finish.Refusal, RawFinishReason: "stop"},
			},
		},
		{
			name: "other finish reasons",
			in: ev(`{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`) +
				ev(`{"choices":[{"index":0,"delta":{},"finish_reason":"content_filter"}]}`) +
				ev(`{"choices":[{"index":0,"delta":{},"finish_reason":"insufficient_system_resource"}]}`) + done,
			want: []llmclient.Chunk{
				{FinishReason: finish.Length, RawFinishReason: "length"},
				{FinishReason: finish.ContentFilter, RawFinishReason: "content_filter"},
				{FinishReason: finish.Other, RawFinishReason: "insufficient_system_resource"},
			},
		},
		{
			name: "Azure prompt filter chunk skipped, content filter results ignored",
			in:   ev(azureFilter) + ev(azureContent) + ev(azureEndCF) + ev(azureStop) + done,
			want: []llmclient.Chunk{
				{ID: "chatcmpl-az", Model: "gpt-4o-2024-05-13", Text: "Hi"},
				{ID: "chatcmpl-az", Model: "gpt-4o-2024-05-13", FinishReason: finish.Stop, RawFinishReason: "stop"},
			},
		},
		{
			name: "keep-alive comments",
			in:   ": keep-alive\n\n" + ev(helloChunk) + ":\n" + ": OPENROUTER PROCESSING\n\n" + done,
			want: []llmclient.Chunk{{KeepAlive: true}, meta(llmclient.Chunk{Text: "Hello"}), {KeepAlive: true}, {KeepAlive: true}},
		},
		{
			name: "CRLF endings and no space after data:",
			in:   "data:" + helloChunk + "\r\n\r\n" + "data: " + stopChunk + "\r\n\r\ndata: [DONE]\r\n\r\n",
			want: []llmclient.Chunk{meta(llmclient.Chunk{Text: "Hello"}), meta(llmclient.Chunk{FinishReason: finish.Stop, RawFinishReason: "stop"})},
		},
		{
			name: "named events: ping is a keep-alive, unknown ones are skipped",
			in:   "event: ping\ndata: {}\n\nevent: proxy.status\ndata: queued, not JSON\n\nevent: message\ndata: " + helloChunk + "\n\n" + done,
			want: []llmclient.Chunk{{KeepAlive: true}, meta(llmclient.Chunk{Text: "Hello"})},
		},
		{
			name: "Mistral content parts",
			in:   ev(`{"choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"hm"},{"type":"text","text":"m"}]},{"type":"text","text":"Yes"}]}}]}`) + done,
			want: []llmclient.Chunk{{Text: "Yes", Reasoning: "hmm"}},
		},
		{
			name: "only choice index 0 is kept",
			in:   ev(`{"choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"content":"mine"}}]}`) + ev(`{"choices":[{"index":1,"delta":{"content":"x"}}]}`) + done,
			want: []llmclient.Chunk{{Text: "mine"}},
		},
		{
			name: "empty data, blank and unknown members skipped",
			in:   "data:\n\n" + ev(`{}`) + ev(`{"choices":null,"usage":null,"error":null,"x_groq":{"id":"r"},"object":"chat.completion.chunk"}`) + ev(helloChunk) + "data: [DONE] \n\n",
			want: []llmclient.Chunk{meta(llmclient.Chunk{Text: "Hello"})},
		},
		{
			name: "data after [DONE] is not read",
			in:   ev(helloChunk) + done + "data: {broken\n\n",
			want: []llmclient.Chunk{meta(llmclient.Chunk{Text: "Hello"})},
		},
	}
	for _, tt := range tests {
		for _, chunked := range []bool{false, true} {
			name := tt.name
			var r io.Reader = strings.NewReader(tt.in)
			if chunked {
				name += "/onebyte"
				r = iotest.OneByteReader(r)
			}
			t.Run(name, func(t *testing.T) {
				s := streamOf(r)
				defer s.Close()
				got, err := providertest.RecvAll(t, s, maxChunks)
				if err != io.EOF {
					t.Fatalf("final error %v, want io.EOF", err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("chunks\n got %+v\nwant %+v", got, tt.want)
				}
				if _, err := s.Recv(); err != io.EOF {
					t.Fatalf("Recv after the end: %v", err)
				}
			})
		}
	}
}

func TestChunkStreamInternsIDs(t *testing.T) {
	s := streamOf(strings.NewReader(ev(helloChunk) + ev(helloChunk) + done)).(*chunkStream)
	a, _ := s.Recv()
	b, _ := s.Recv()
	if a.ID != b.ID || a.Model != b.Model || a.ID == "" {
		t.Fatal("ids differ")
	}
	if unsafeStringData(a.ID) != unsafeStringData(b.ID) || unsafeStringData(a.Model) != unsafeStringData(b.Model) {
		t.Fatal("repeated id or model not reused")
	}
}

func TestChunkStreamErrors(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		n     int // chunks before the error
		check func(t *testing.T, err error)
	}{
		{
			name: "cut without [DONE] before a finish reason",
			in:   ev(helloChunk) + ev(helloChunk),
			n:    2,
			check: func(t *testing.T, err error) {
				if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.HasPrefix(err.Error(), "openai: ") {
					t.Fatalf("error %v, want io.ErrUnexpectedEOF", err)
				}
			},
		},
		{
			name: "no [DONE] after a finish reason is a clean end",
			in:   ev(helloChunk) + ev(stopChunk),
			n:    2,
			check: func(t *testing.T, err error) {
				if err != io.EOF {
					t.Fatalf("error %v, want io.EOF", err)
				}
			},
		},
		{
			name: "cut in the middle of a line",
			in:   ev(helloChunk) + `data: {"id":"chatcmpl-123","choices":[{"delta":{"content":"He`,
			n:    1,
			check: func(t *testing.T, err error) {
				// The partial line is skipped as a malformed event, but it hid the end: the
				// stream never ends as a clean EOF.
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("error %v (class %v)", err, llmclient.ClassOf(err))
				}
			},
		},
		{
			name: "empty body",
			in:   "",
			check: func(t *testing.T, err error) {
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("error %v", err)
				}
			},
		},
		{
			name: "in-band server error mid-stream",
			in:   ev(helloChunk) + ev(`{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`) + done,
			n:    1,
			check: func(t *testing.T, err error) {
				var e *llmclient.Error
				if !errors.As(err, &e) || e.Class != failure.ServerError || e.Type != "server_error" ||
					!strings.Contains(e.Message, "Sorry about that") || e.RequestID != "req_123" {
					t.Fatalf("error %#v", err)
				}
			},
		},
		{
			name: "in-band rate limit before content",
			in:   ev(roleChunk) + ev(`{"error":{"message":"Rate limit reached. Please try again in 1.5s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`),
			n:    1,
			check: func(t *testing.T, err error) {
				var e *llmclient.Error
				if !errors.As(err, &e) || e.Class != failure.RateLimited || e.Code != "rate_limit_exceeded" {
					t.Fatalf("error %v", err)
				}
			},
		},
		{
			name: "Azure filter chunk then in-band error",
			in:   ev(azureFilter) + ev(`{"error":{"message":"The response was filtered","type":null,"param":"prompt","code":"content_filter","status":400}}`),
			check: func(t *testing.T, err error) {
				if llmclient.ClassOf(err) != failure.ContentFiltered {
					t.Fatalf("error %v", err)
				}
			},
		},
		{
			name: "vLLM flat error object",
			in:   ev(`{"object":"error","message":"out of memory","type":"InternalServerError","param":null,"code":500}`),
			check: func(t *testing.T, err error) {
				var e *llmclient.Error
				if !errors.As(err, &e) || e.Class != failure.ServerError || e.Message != "out of memory" {
					t.Fatalf("error %v", err)
				}
			},
		},
		{
			name: "error event",
			in:   "event: error\ndata: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\",\"code\":\"server_is_overloaded\"}}\n\n",
			check: func(t *testing.T, err error) {
				var e *llmclient.Error
				if !errors.As(err, &e) || e.Code != "server_is_overloaded" {
					t.Fatalf("error %v", err)
				}
			},
		},
		{
			name: "OpenRouter error with a chunk shape",
			in: ev(helloChunk) + ev(`{"id":"gen-1","object":"chat.completion.chunk","created":1,"model":"m","provider":"p","error":{"code":502,"message":"Provider returned error"},`+
				`"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}`),
			n: 1,
			check: func(t *testing.T, err error) {
				var e *llmclient.Error
				if !errors.As(err, &e) || e.Class != failure.ServerError || e.Message != "Provider returned error" {
					t.Fatalf("error %v", err)
				}
			},
		},
		{
			name: "error as a string",
			in:   ev(`{"error":"upstream connect error"}`),
			check: func(t *testing.T, err error) {
				if llmclient.ClassOf(err) != failure.ServerError || !strings.Contains(err.Error(), "upstream connect error") {
					t.Fatalf("error %v", err)
				}
			},
		},
		{
			name: "malformed event in a healthy stream is skipped",
			in:   ev(helloChunk) + ev(`{"choices":[{"delta":{"content":"x"}]}`) + ev(stopChunk) + done,
			n:    2,
			check: func(t *testing.T, err error) {
				if err != io.EOF {
					t.Fatalf("error %v, want io.EOF", err)
				}
			},
		},
		{
			name: "malformed JSON before any chunk",
			in:   ev(`{"choices":[{"delta":{"content":"x"}]}`) + ev(helloChunk) + done,
			check: func(t *testing.T, err error) {
				var e *llmclient.Error
				var se *jsonscan.SyntaxError
				if !errors.As(err, &e) || e.Class != failure.ServerError || !errors.As(err, &se) ||
					!strings.Contains(e.Message, "openai: malformed stream chunk") {
					t.Fatalf("error %v", err)
				}
			},
		},
		{
			name: "malformed JSON past the bound",
			in:   ev(helloChunk) + strings.Repeat(ev(`{"choices":[{"delta":{"content":"x"}]}`), 9) + done,
			n:    1,
			check: func(t *testing.T, err error) {
				var e *llmclient.Error
				var se *jsonscan.SyntaxError
				if !errors.As(err, &e) || e.Class != failure.ServerError || !errors.As(err, &se) ||
					!strings.Contains(e.Message, "openai: malformed stream chunk") || !strings.Contains(e.Message, "8 malformed events skipped") {
					t.Fatalf("error %v", err)
				}
			},
		},
		{
			name: "not JSON",
			in:   ev(`<html>502 Bad Gateway</html>`),
			check: func(t *testing.T, err error) {
				if llmclient.ClassOf(err) != failure.ServerError || !strings.Contains(err.Error(), "502 Bad Gateway") {
					t.Fatalf("error %v", err)
				}
			},
		},
		{
			name: "wrong types",
			in:   ev(`{"choices":[{"delta":{"content":42}}]}`),
			check: func(t *testing.T, err error) {
				if llmclient.ClassOf(err) != failure.ServerError {
					t.Fatalf("error %v", err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := streamOf(strings.NewReader(tt.in))
			defer s.Close()
			got, err := providertest.RecvAll(t, s, maxChunks)
			if len(got) != tt.n {
				t.Fatalf("%d chunks before the error, want %d: %+v", len(got), tt.n, got)
			}
			tt.check(t, err)
			if _, err2 := s.Recv(); err2 != err {
				t.Fatalf("error not sticky: %v then %v", err, err2)
			}
		})
	}
}

func TestChunkStreamReadError(t *testing.T) {
	boom := errors.New("connection reset by peer")
	s := streamOf(io.MultiReader(strings.NewReader(ev(helloChunk)), iotest.ErrReader(boom)))
	got, err := providertest.RecvAll(t, s, maxChunks)
	if len(got) != 1 || !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "openai: reading stream") {
		t.Fatalf("chunks %d, error %v", len(got), err)
	}
}

func TestChunkStreamEventTooLarge(t *testing.T) {
	// 5 MiB of content in one data line, generated rather than held in memory.
	const size = 5 << 20
	body := io.MultiReader(
		strings.NewReader(ev(helloChunk)+`data: {"choices":[{"delta":{"content":"`),
		io.LimitReader(repeatByte('a'), size),
		strings.NewReader(`"}}]}`+"\n\n"+done),
	)
	s := streamOf(body)
	got, err := providertest.RecvAll(t, s, maxChunks)
	if len(got) != 1 || !errors.Is(err, sse.ErrEventTooLarge) || llmclient.ClassOf(err) != failure.ServerError ||
		!strings.Contains(err.Error(), "openai: stream event too large") {
		t.Fatalf("chunks %d, error %v: want the upstream's fault, a server error", len(got), err)
	}
}

type repeatByte byte

func (r repeatByte) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

func TestChunkStreamRecvAfterClose(t *testing.T) {
	s := streamOf(strings.NewReader(ev(helloChunk) + ev(helloChunk) + done))
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, err := s.Recv(); err == nil || err == io.EOF {
		t.Fatalf("Recv after Close: %v", err)
	}
}
