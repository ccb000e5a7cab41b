package gemini

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
	f.Add(429, `{"error":{"code":429,"message":"You exceeded your current quota. Please retry in 10.68s.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"22s"}]}}`, "")
	f.Add(429, `[{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]}}]`, "3")
	f.Add(400, `{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}`, "")
	f.Add(500, `{"error":{"code":500,"message":"input context too long","status":"INTERNAL"}}`, "Wed, 21 Oct 2015 07:28:00 GMT")
	f.Add(503, "<html>unavailable</html>", "")
	f.Add(0, `{"error":{"code":-1,"details":[{"retryDelay":"99999999999999999999s"}]}}`, "")
	f.Add(200, `[]`, "")
	f.Fuzz(func(t *testing.T, status int, body, retryAfter string) {
		e := ClassifyError(status, http.Header{"Retry-After": {retryAfter}}, []byte(body))
		if e == nil || e.Status != status || e.Class == failure.None {
			t.Fatalf("ClassifyError = %+v", e)
		}
		if e.RetryAfter < 0 {
			t.Fatalf("negative RetryAfter %v", e.RetryAfter)
		}
		_ = e.Error()
	})
}

// FuzzStream feeds arbitrary bytes to the stream parser, as SSE and as a JSON body: it
// must end with io.EOF only after a finish reason, never panic, and never loop.
func FuzzStream(f *testing.F) {
	f.Add(`data: {"candidates":[{"content":{"parts":[{"text":"Hi","thought":true},{"functionCall":{"name":"f","args":{}}}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1}}`, false)
	f.Add("data: {\"error\":{\"code\":503,\"status\":\"UNAVAILABLE\"}}\n\n", false)
	f.Add("data: {\"promptFeedback\":{\"blockReason\":\"SAFETY\"}}\n\n: ping\n\n", false)
	f.Add("data: {\"candidates\":[]}\r\n\r\ndata: {\"usageMetadata\":{\"totalTokenCount\":-3}}\r\n", false)
	f.Add(`[{"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":"MAX_TOKENS"}]}]`, true)
	f.Add(`[{"error":{"code":429}}]`, true)
	f.Add(`{"candidates":[{"finishReason":""}]}`, true)
	f.Add("data: {\"candidates\":[]}\n\n{\n  \"error\": {\"code\": 429}\n}\n", false)
	f.Add("[{\"error\":{}},{\"candidates\":[{\"finishReason\":\"STOP\"}]}]\n[1]\n", false)
	f.Fuzz(func(t *testing.T, body string, jsonMode bool) {
		h := http.Header{"Content-Type": {"text/event-stream"}}
		if jsonMode {
			h.Set("Content-Type", "application/json; charset=UTF-8")
		}
		s := newStream(&http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body)), Header: h}, func() {}, "key")
		finished, err := providertest.FuzzRecv(t, s, len(body)+1)
		if err == io.EOF && !finished {
			t.Fatal("io.EOF without a finish reason")
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

// TestVertexDefaultHost checks the default Vertex AI hosts, which tests cannot reach.
func TestVertexDefaultHost(t *testing.T) {
	for loc, want := range map[string]string{
		"us-central1": "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/publishers/google/models/",
		"global":      "https://aiplatform.googleapis.com/v1/projects/p/locations/global/publishers/google/models/",
	} {
		p, err := New(WithVertex("p", loc))
		if err != nil {
			t.Fatal(err)
		}
		if p.prefix != want {
			t.Errorf("%s: prefix %q, want %q", loc, p.prefix, want)
		}
	}
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if want := "https://generativelanguage.googleapis.com/v1beta/models/"; p.prefix != want {
		t.Errorf("default prefix %q, want %q", p.prefix, want)
	}
}

// FuzzParseEmbeddings checks that any embedding body yields n vectors of one length or an
// *llmclient.Error, never a panic.
func FuzzParseEmbeddings(f *testing.F) {
	f.Add(`{"embedding":{"values":[1,2]}}`, uint8(1))
	f.Add(`{"embeddings":[{"values":[1]},{"values":[2]}],"usageMetadata":{"promptTokenCount":3}}`, uint8(2))
	f.Add(`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}`, uint8(1))
	f.Add(`{"embeddings":[{"values":[]}]}`, uint8(1))
	f.Fuzz(func(t *testing.T, body string, n uint8) {
		out, e := parseEmbeddings(200, []byte(body), int(n))
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
