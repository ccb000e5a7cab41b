package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"
)

// simUpstream is an in-process OpenAI-compatible server on loopback that plays a script of
// responses in the vendor's wire format, one per request; the last step repeats.
type simUpstream struct {
	*httptest.Server
	mu    sync.Mutex
	steps []http.HandlerFunc
	calls atomic.Int64
}

func newSimUpstream(steps ...http.HandlerFunc) *simUpstream {
	s := &simUpstream{steps: steps}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

func (s *simUpstream) serve(w http.ResponseWriter, r *http.Request) {
	s.calls.Add(1)
	s.mu.Lock()
	step := s.steps[0]
	if len(s.steps) > 1 {
		s.steps = s.steps[1:]
	}
	s.mu.Unlock()
	step(w, r)
}

func (s *simUpstream) Calls() int64 { return s.calls.Load() }

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", fmt.Sprintf("req_sim_%d", time.Now().UnixNano()))
	w.WriteHeader(status)
	fmt.Fprint(w, body)
}

func reply429(retryAfterSeconds int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Retry-After", fmt.Sprint(retryAfterSeconds))
		h.Set("X-Ratelimit-Limit-Requests", "500")
		h.Set("X-Ratelimit-Remaining-Requests", "0")
		h.Set("X-Ratelimit-Reset-Requests", fmt.Sprintf("%ds", retryAfterSeconds))
		writeJSON(w, http.StatusTooManyRequests, `{"error":{"message":"Rate limit reached for gpt-4o-mini on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 1s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
	}
}

func reply503() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusServiceUnavailable, `{"error":{"message":"The server is overloaded or not ready yet.","type":"service_unavailable_error","param":null,"code":"server_is_overloaded"}}`)
	}
}

func reply500() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusInternalServerError, `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`)
	}
}

func replyOK(text string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, fmt.Sprintf(`{"id":"chatcmpl-sim","object":"chat.completion","created":1764460800,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":%q,"refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":14,"completion_tokens":8,"total_tokens":22,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`, text))
	}
}

// streamOK streams the texts as Chat Completions chunks, then usage and [DONE].
func streamOK(texts ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		fmt.Fprint(w, `data: {"id":"chatcmpl-sim","object":"chat.completion.chunk","created":1764460800,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`+"\n\n")
		for _, t := range texts {
			fmt.Fprintf(w, `data: {"id":"chatcmpl-sim","object":"chat.completion.chunk","created":1764460800,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}]}`+"\n\n", t)
			f.Flush()
			time.Sleep(50 * time.Millisecond)
		}
		fmt.Fprint(w, `data: {"id":"chatcmpl-sim","object":"chat.completion.chunk","created":1764460800,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"chatcmpl-sim","object":"chat.completion.chunk","created":1764460800,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":14,"completion_tokens":6,"total_tokens":20}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

// stallStream accepts a stream and sends nothing but SSE keep-alive comments, as vendors do
// while a request waits in their queue.
func stallStream(d time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		deadline := time.After(d)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			fmt.Fprint(w, ": keep-alive\n\n")
			f.Flush()
			select {
			case <-r.Context().Done():
				return
			case <-deadline:
				return
			case <-tick.C:
			}
		}
	}
}
