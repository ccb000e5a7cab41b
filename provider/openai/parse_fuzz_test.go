package openai

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
)

// FuzzParseResponsesBody checks that any Responses API body yields a response or an
// *llmclient.Error, never a panic, and that a response's finish reason is a known one.
func FuzzParseResponsesBody(f *testing.F) {
	f.Add(`{"id":"r","model":"m","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}],"usage":{"input_tokens":1}}`)
	f.Add(`{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[]}`)
	f.Add(`{"status":"failed","error":{"code":"rate_limit_exceeded","message":"x"}}`)
	f.Add(`{"error":{"message":"x"}}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, body string) {
		out, e := parseResponsesBody(200, http.Header{}, []byte(body), time.Unix(0, 0))
		if (out == nil) == (e == nil) {
			t.Fatalf("parseResponsesBody = %v, %v", out, e)
		}
		if out != nil {
			switch out.FinishReason {
			case finish.None, finish.Stop, finish.Length, finish.ToolCalls,
				finish.ContentFilter, finish.Refusal, finish.Other:
			default:
				t.Fatalf("finish reason %q", out.FinishReason)
			}
		}
	})
}

// FuzzParseEmbeddings checks that any embeddings body yields n vectors of one length or
// an *llmclient.Error, never a panic.
func FuzzParseEmbeddings(f *testing.F) {
	f.Add(`{"data":[{"index":0,"embedding":[1,2]}],"usage":{"prompt_tokens":1}}`, uint8(1))
	f.Add(`{"data":[{"index":1,"embedding":"AADAPw=="},{"index":0,"embedding":"AAAAAA=="}]}`, uint8(2))
	f.Add(`{"data":[{"index":-1,"embedding":[1]}]}`, uint8(1))
	f.Add(`{"error":{"code":"x"}}`, uint8(1))
	f.Fuzz(func(t *testing.T, body string, n uint8) {
		out, e := parseEmbeddings(200, http.Header{}, []byte(body), int(n), time.Unix(0, 0))
		if (out == nil) == (e == nil) {
			t.Fatalf("parseEmbeddings = %v, %v", out, e)
		}
		if out != nil {
			if len(out.Vectors) != int(n) {
				t.Fatalf("%d vectors for %d inputs", len(out.Vectors), n)
			}
			for _, v := range out.Vectors {
				if len(v) == 0 || len(v) != len(out.Vectors[0]) {
					t.Fatal("empty or mixed vectors")
				}
			}
		}
	})
}

// FuzzResponsesStream checks the typed Responses API stream: no panic, a bounded number
// of chunks, sticky classified errors, and a clean end only after a terminal event.
func FuzzResponsesStream(f *testing.F) {
	f.Add("event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\"}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"usage\":{\"input_tokens\":1}}}\n\n")
	f.Add("event: error\ndata: {\"type\":\"error\",\"code\":\"insufficient_quota\",\"message\":\"x\"}\n\n")
	f.Add("data: {\"type\":\"response.failed\",\"response\":{\"error\":{\"code\":\"server_error\"}}}\n\n")
	f.Add(": ping\n\ndata: {\"type\":\"response.output_item.added\",\"output_index\":3,\"item\":{\"type\":\"function_call\",\"call_id\":\"c\"}}\n\n")
	f.Fuzz(func(t *testing.T, body string) {
		s := newResponsesStream(&http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}, true, "sk-fuzz")
		defer s.Close()
		terminal := false
		for i := 0; ; i++ {
			c, err := s.Recv()
			if err != nil {
				if again, err2 := s.Recv(); err2 != err || again.HasContent() {
					t.Fatalf("error not sticky: %v then %v", err, err2)
				}
				if err == io.EOF && !terminal {
					t.Fatal("clean end without a terminal event")
				}
				if err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF) && llmclient.ClassOf(err) == failure.Unknown {
					t.Fatalf("unclassifiable error %v", err)
				}
				if err != io.EOF && strings.Contains(err.Error(), "sk-fuzz") {
					t.Fatal("key in error")
				}
				return
			}
			if i > len(body) {
				t.Fatalf("%d chunks from %d bytes", i, len(body))
			}
			terminal = terminal || c.FinishReason != finish.None
		}
	})
}
