package conformance_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/llmclient/llmclient/provider/openai"
)

// TestStreamGetsOneShotBody checks a 200 answer to a streaming request that is a one-shot
// JSON body instead of an event stream (a server or proxy that ignored the stream flag):
// an error body is classified as on a one-shot call (not a network interruption, which
// would be retried and count against the breaker), and a whole answer is served as one
// chunk followed by a clean end.
func TestStreamGetsOneShotBody(t *testing.T) {
	chat := func(c *http.Client) (llmclient.Provider, error) {
		return openai.New(openai.WithBaseURL("http://127.0.0.1:1/v1"), openai.WithHTTPClient(c), openai.WithAPIKey("sk-k"))
	}
	responses := func(c *http.Client) (llmclient.Provider, error) {
		return openai.New(openai.WithBaseURL("http://127.0.0.1:1/v1"), openai.WithHTTPClient(c), openai.WithAPIKey("sk-k"), openai.WithResponsesAPI())
	}
	messages := func(c *http.Client) (llmclient.Provider, error) {
		return anthropic.New(anthropic.WithBaseURL("http://127.0.0.1:1"), anthropic.WithHTTPClient(c), anthropic.WithAPIKey("sk-k"))
	}
	const quota = `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	for _, tc := range []struct {
		name, contentType, body string
		mk                      func(*http.Client) (llmclient.Provider, error)
		class                   failure.Class // failure.None: an answer with text "Hi"
	}{
		{"chat quota", "application/json", quota, chat, failure.QuotaExhausted},
		{"chat quota mislabeled", "text/event-stream", quota, chat, failure.QuotaExhausted},
		{"chat quota pretty", "application/json", "{\n  \"error\": {\n    \"message\": \"quota\",\n    \"code\": \"insufficient_quota\"\n  }\n}\n", chat, failure.QuotaExhausted},
		{"chat answer", "application/json", `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`, chat, failure.None},
		{"chat answer without finish reason", "application/json", `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"}}]}`, chat, failure.Network},
		{"chat error array", "application/json", `[{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}}]`, chat, failure.RateLimited},
		{"chat garbage object", "application/json", `{"unexpected":true}`, chat, failure.ServerError},
		{"responses quota", "application/json", quota, responses, failure.QuotaExhausted},
		{"responses answer", "application/json", `{"id":"r1","object":"response","status":"completed","model":"m","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hi"}]}]}`, responses, failure.None},
		{"messages overloaded", "application/json", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}`, messages, failure.Overloaded},
		{"messages answer", "application/json", `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`, messages, failure.None},
		{"messages garbage object", "application/json", `{"unexpected":true}`, messages, failure.ServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.mk(&http.Client{Transport: fixedTransport{tc.contentType, tc.body}})
			if err != nil {
				t.Fatal(err)
			}
			st, err := p.Stream(context.Background(), &llmclient.Call{Model: "m", Request: &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("hi")}}})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var text string
			for {
				c, err := st.Recv()
				if err == io.EOF {
					break
				}
				if err != nil {
					if c := llmclient.ClassOf(err); c != tc.class {
						t.Fatalf("err = %v (class %v), want class %v", err, c, tc.class)
					}
					return
				}
				text += c.Text
			}
			if tc.class != failure.None || text != "Hi" {
				t.Errorf("clean end with text %q; want class %v (text \"Hi\" when none)", text, tc.class)
			}
		})
	}
}
