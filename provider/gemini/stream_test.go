package gemini_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/providertest"
)

// streamText is streamGenerateContent?alt=sse output in the documented shape: data lines
// only, usage on every chunk (cumulative), finishReason on the last, no end marker and no
// blank line after the last event.
const streamText = `data: {"candidates": [{"content": {"parts": [{"text": "Thinking about counting.", "thought": true}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 8,"totalTokenCount": 8},"modelVersion": "gemini-2.5-flash","responseId": "r-1"}

data: {"candidates": [{"content": {"parts": [{"text": "One, two"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 8,"candidatesTokenCount": 3,"totalTokenCount": 11},"modelVersion": "gemini-2.5-flash","responseId": "r-1"}

: keep-alive

data: {"candidates": [{"content": {"parts": [{"text": ", three."}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 8,"candidatesTokenCount": 6,"thoughtsTokenCount": 20,"totalTokenCount": 34},"modelVersion": "gemini-2.5-flash","responseId": "r-1"}`

// streamTools has parallel function calls in one chunk, the first signed.
const streamTools = `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Checking."}]},"index":0}],"modelVersion":"gemini-3-pro-preview","responseId":"r-2"}

data: {"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"c2ln"},{"functionCall":{"name":"get_weather","args":{"city":"Rome"}}}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":70,"candidatesTokenCount":30,"totalTokenCount":100},"modelVersion":"gemini-3-pro-preview","responseId":"r-2"}

`

const errorLine = `data: {"error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}}

`

func openStream(t *testing.T, reply http.HandlerFunc) llmclient.ProviderStream {
	t.Helper()
	p, _ := serve(t, reply)
	st, err := p.Stream(context.Background(), providertest.UserCall("gemini-2.5-flash", llmclient.UserMessage("Count")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestStreamText(t *testing.T) {
	got, err := providertest.Drain(openStream(t, providertest.SSE(streamText)))
	if err != nil {
		t.Fatal(err)
	}
	providertest.EqualLines(t, got, []string{
		`id=r-1 model=gemini-2.5-flash reasoning="Thinking about counting."`,
		`text="One, two"`,
		"keep-alive",
		`text=", three." finish=stop(STOP) usage=in:8,out:26,total:34,cached:0,reasoning:20`,
	})
}

func TestStreamToolCalls(t *testing.T) {
	got, err := providertest.Drain(openStream(t, providertest.SSE(streamTools)))
	if err != nil {
		t.Fatal(err)
	}
	providertest.EqualLines(t, got, []string{
		`id=r-2 model=gemini-3-pro-preview text="Checking."`,
		`tool[0]=call_0__thought__c2ln,get_weather,{"city":"Paris"} tool[1]=call_1,get_weather,{"city":"Rome"} finish=tool_calls(STOP) usage=in:70,out:30,total:100,cached:0,reasoning:0`,
	})
}

// TestStreamUsageAfterFinish checks that usage arriving in a chunk after the finish reason
// is reported, and that the stream still ends cleanly.
func TestStreamUsageAfterFinish(t *testing.T) {
	body := `data: {"candidates":[{"content":{"parts":[{"text":"Hi"}]},"finishReason":"MAX_TOKENS"}]}

data: {"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":2,"totalTokenCount":6}}

`
	got, err := providertest.Drain(openStream(t, providertest.SSE(body)))
	if err != nil {
		t.Fatal(err)
	}
	providertest.EqualLines(t, got, []string{
		`text="Hi" finish=length(MAX_TOKENS)`,
		"usage=in:4,out:2,total:6,cached:0,reasoning:0",
	})
}

func TestStreamErrorLine(t *testing.T) {
	first, _, _ := strings.Cut(streamText, "\n\n")
	cases := map[string]struct {
		body   string
		chunks int
	}{
		"before first token": {errorLine, 0},
		"mid-stream":         {first + "\n\n" + errorLine, 1},
		// go-genai api_client.go: an error inside the stream can come as bare JSON, without
		// "data:", on one line or pretty-printed over several, or as a one-element array.
		"bare JSON line":  {first + "\n\n" + strings.TrimPrefix(errorLine, "data: "), 1},
		"bare JSON lines": {first + "\n\n{\n  \"error\": {\n    \"code\": 503,\n    \"message\": \"The model is overloaded {\\\"x\\\"}.\",\n    \"status\": \"UNAVAILABLE\"\n  }\n}\n", 1},
		"bare JSON array": {"[" + strings.TrimSpace(strings.TrimPrefix(errorLine, "data: ")) + "]\n", 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, e := providertest.DrainError(t, openStream(t, providertest.SSE(tc.body)))
			if e.Class != failure.Overloaded || e.Code != "UNAVAILABLE" || e.Status != 200 {
				t.Errorf("error = %+v", e)
			}
			if len(got) != tc.chunks {
				t.Errorf("chunks before the error = %q, want %d", got, tc.chunks)
			}
		})
	}
	t.Run("bare JSON quota", func(t *testing.T) {
		st := openStream(t, providertest.SSE(first+"\n\n"+status(429, "RESOURCE_EXHAUSTED", "You exceeded your current quota.", perMinute)+"\n"))
		_, err := providertest.Drain(st)
		var e *llmclient.Error
		if !errors.As(err, &e) || e.Class != failure.RateLimited || e.RetryAfter != 22*time.Second {
			t.Errorf("err = %+v", err)
		}
	})
	t.Run("bare garbage", func(t *testing.T) {
		_, err := providertest.Drain(openStream(t, providertest.SSE(first+"\n\n{\"error\": oops}\n")))
		var e *llmclient.Error
		if !errors.As(err, &e) || e.Class != failure.ServerError {
			t.Errorf("err = %+v", err)
		}
	})
	t.Run("quota mid-stream", func(t *testing.T) {
		st := openStream(t, providertest.SSE(first+"\n\ndata: "+status(429, "RESOURCE_EXHAUSTED", "You exceeded your current quota.", perMinute)+"\n\n"))
		_, err := providertest.Drain(st)
		var e *llmclient.Error
		if !errors.As(err, &e) || e.Class != failure.RateLimited || e.RetryAfter != 22*time.Second {
			t.Errorf("err = %+v", err)
		}
	})
	t.Run("blocked prompt", func(t *testing.T) {
		st := openStream(t, providertest.SSE(`data: {"promptFeedback": {"blockReason": "SAFETY"},"usageMetadata": {"promptTokenCount": 5,"totalTokenCount": 5},"modelVersion": "gemini-2.5-flash"}`+"\n\n"))
		_, err := providertest.Drain(st)
		var e *llmclient.Error
		if !errors.As(err, &e) || e.Class != failure.ContentFiltered || e.Code != "SAFETY" || e.Partial == nil || e.Partial.Usage.InputTokens != 5 {
			t.Errorf("err = %+v", err)
		}
	})
}

// TestStreamJSONBody checks a response that ignored alt=sse: a JSON array of responses, or
// an error array.
func TestStreamJSONBody(t *testing.T) {
	arr := `[{"candidates":[{"content":{"parts":[{"text":"Hel"}]}}],"responseId":"j"},
	         {"candidates":[{"content":{"parts":[{"text":"lo"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":2,"candidatesTokenCount":2,"totalTokenCount":4}}]`
	got, err := providertest.Drain(openStream(t, providertest.Fixed(http.StatusOK, arr)))
	if err != nil {
		t.Fatal(err)
	}
	providertest.EqualLines(t, got, []string{`id=j model= text="Hel"`, `text="lo" finish=stop(STOP) usage=in:2,out:2,total:4,cached:0,reasoning:0`})

	_, err = providertest.Drain(openStream(t, providertest.Fixed(http.StatusOK, "["+status(429, "RESOURCE_EXHAUSTED", "quota", perDay)+"]")))
	if c := llmclient.ClassOf(err); c != failure.QuotaExhausted {
		t.Errorf("error array: err = %v (class %v)", err, c)
	}
	_, err = providertest.Drain(openStream(t, providertest.Fixed(http.StatusOK, `[{"candidates":[`)))
	if c := llmclient.ClassOf(err); c != failure.ServerError {
		t.Errorf("truncated array: err = %v (class %v)", err, c)
	}
}

func TestStreamCut(t *testing.T) {
	first, _, _ := strings.Cut(streamText, "\n\n")
	providertest.CheckStreamCuts(t, openStream, providertest.StreamCuts{
		Unfinished: strings.Replace(streamText, `"finishReason": "STOP",`, "", 1), // no finish reason
		Chunks:     4,
		Dropped:    first + "\n\ndata: {\"candidates\": [{\"content",
		Garbage:    "data: {not json\n\n",
	})
}

func TestStreamHTTPError(t *testing.T) {
	p, _ := serve(t, providertest.Fixed(503, status(503, "UNAVAILABLE", "The model is overloaded.", "")))
	st, err := p.Stream(context.Background(), providertest.UserCall("m", llmclient.UserMessage("hi")))
	if st != nil || llmclient.ClassOf(err) != failure.Overloaded {
		t.Fatalf("Stream = %v, %v; want an overloaded error", st, err)
	}
}

// TestStreamCloseUnblocks checks that Close ends a Recv waiting on a silent upstream.
func TestStreamCloseUnblocks(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	first, _, _ := strings.Cut(streamText, "\n\n")
	st := openStream(t, providertest.Stall(first+"\n\n", release))
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	providertest.CheckCloseUnblocks(t, st)
}

// TestStreamJSONBodyTooLarge checks that a response that ignored alt=sse and sends a JSON
// body over 32 MiB fails as a server_error (the upstream's fault, retried and failed
// over), as the same body does on a one-shot call, not as an unclassified error.
func TestStreamJSONBodyTooLarge(t *testing.T) {
	big := `[{"candidates":[{"content":{"parts":[{"text":"` + strings.Repeat("a", 32<<20) + `"}]},"finishReason":"STOP"}]}]`
	_, err := providertest.Drain(openStream(t, providertest.Fixed(http.StatusOK, big)))
	if c := llmclient.ClassOf(err); c != failure.ServerError {
		t.Errorf("err = %v (class %v), want a server_error", err, c)
	}
}
