package anthropic

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/providertest"
)

func FuzzClassifyError(f *testing.F) {
	f.Add(429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"},"request_id":"req_1"}`, "12")
	f.Add(400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`, "")
	f.Add(429, `{"type":"error","error":{"type":"rate_limit_error","message":"x","details":{"error_code":"enforced_spend_limit_reached"}}}`, "Wed, 21 Oct 2015 07:28:00 GMT")
	f.Add(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "-1")
	f.Add(502, "<html>bad gateway</html>", "")
	f.Add(0, `{"error":null}`, "1e9")
	f.Add(200, `{"type":"error","error":{"type":"api_error","message":"\u0000\xff"}}`, "")
	f.Fuzz(func(t *testing.T, status int, body, retryAfter string) {
		h := http.Header{"Retry-After": {retryAfter}}
		e := ClassifyError(status, h, []byte(body))
		if e == nil || e.Status != status || e.Class == failure.None {
			t.Fatalf("ClassifyError = %+v", e)
		}
		if e.RetryAfter < 0 {
			t.Fatalf("negative RetryAfter %v", e.RetryAfter)
		}
		if len(e.Message) > len(body) && !strings.HasPrefix(body, "{") {
			t.Fatalf("message %q longer than body", e.Message)
		}
		_ = e.Error()
	})
}

// FuzzStream feeds arbitrary bytes to the stream parser: it must end with io.EOF only
// after message_stop (or a one-shot message body with its stop_reason), never panic, and
// never loop.
func FuzzStream(f *testing.F) {
	f.Add("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"c\",\"usage\":{\"input_tokens\":3}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	f.Add("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
	f.Add(": ping\n\nevent: ping\ndata: {\"type\":\"ping\"}\n\ndata: {\"type\":\"message_stop\"}")
	f.Add("data: {\"type\":\"content_block_delta\",\"delta\":null}\n\ndata: {\"type\":\"message_start\"}\n\n")
	f.Add("event: message_delta\r\ndata: {\"usage\":{\"input_tokens\":null,\"output_tokens\":-4}}\r\n\r\n")
	f.Add(`{"id":"msg_1","type":"message","model":"c","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`)
	f.Fuzz(func(t *testing.T, body string) {
		s := newStream(&http.Response{Body: io.NopCloser(strings.NewReader(body)), Header: http.Header{}},
			func() {}, "key")
		_, err := providertest.FuzzRecv(t, s, len(body)+1)
		// JSON keys match case-insensitively: "stop_reAson" is a stop_reason.
		low := strings.ToLower(body)
		if err == io.EOF && !strings.Contains(low, "message_stop") && !strings.Contains(low, "stop_reason") {
			t.Fatal("io.EOF without message_stop or a stop_reason")
		}
	})
}

// TestStreamCancelOnClose checks that Close cancels the request context (the fuzz harness
// passes a no-op cancel).
func TestStreamCancelOnClose(t *testing.T) {
	providertest.CheckCancelOnClose(t, func(resp *http.Response, cancel context.CancelFunc) llmclient.ProviderStream {
		return newStream(resp, cancel, "")
	})
}
