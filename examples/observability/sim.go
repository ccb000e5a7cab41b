package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"
)

// sim is an OpenAI-compatible upstream on loopback that answers in the vendor's wire
// format: mostly successes (one-shot or streamed) with usage and x-ratelimit-* headers,
// on a fixed rhythm 429s with a short retry-after-ms (every rateLimitEvery-th request; 0:
// none) and 500s (every failEvery-th), and 401 for revokedKey.
type sim struct {
	*httptest.Server
	name                      string
	rateLimitEvery, failEvery int64
	calls                     atomic.Int64
}

// simTPM is the tokens-per-minute quota the simulated upstream reports.
const simTPM = 200_000

// revokedKey is a key the simulated upstreams answer with 401.
const revokedKey = "sk-demo-revoked"

func newSim(name string, rateLimitEvery, failEvery int64) *sim {
	s := &sim{name: name, rateLimitEvery: rateLimitEvery, failEvery: failEvery}
	s.Server = &httptest.Server{
		Listener: mustListen(),
		Config:   &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 5 * time.Second},
	}
	s.Start()
	return s
}

// mustListen listens on loopback only.
func mustListen() net.Listener {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("observability: listening on loopback: %v", err))
	}
	return l
}

func (s *sim) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	n := s.calls.Add(1)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Ratelimit-Limit-Requests", "5000")
	h.Set("X-Ratelimit-Remaining-Requests", fmt.Sprint(max(5000-n, 0)))
	h.Set("X-Ratelimit-Limit-Tokens", fmt.Sprint(simTPM))
	// The tokens left fall by 900 a request and are replenished every 200 requests, so
	// they dip below 20% of the quota now and then.
	h.Set("X-Ratelimit-Remaining-Tokens", fmt.Sprint(simTPM-n%200*900))
	h.Set("X-Ratelimit-Reset-Tokens", "6s")
	switch {
	case r.Header.Get("Authorization") == "Bearer "+revokedKey:
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":{"message":"Incorrect API key provided: sk-demo-*****oked.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
		return
	case s.rateLimitEvery > 0 && n%s.rateLimitEvery == 0:
		h.Set("Retry-After-Ms", "20")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"error":{"message":"Rate limit reached for gpt-4o-mini on tokens per min (TPM). Please try again in 20ms.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`)
		return
	case s.failEvery > 0 && n%s.failEvery == 0:
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`)
		return
	}
	// A latency that varies, so that the histograms have a shape.
	if !sleep(r.Context(), time.Duration(2+n%7*3)*time.Millisecond) {
		return
	}
	if strings.Contains(string(body), `"stream":true`) {
		s.stream(w, r)
		return
	}
	fmt.Fprintf(w, `{"id":"chatcmpl-%d","object":"chat.completion","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"Hello from %s."},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`, n, s.name)
}

func (s *sim) stream(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta, finish string) string {
		return `data: {"id":"chatcmpl-s","object":"chat.completion.chunk","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	events := []string{chunk(`{"role":"assistant"}`, "null")}
	for _, word := range []string{"Streaming ", "from ", s.name, "."} {
		events = append(events, chunk(`{"content":"`+word+`"}`, "null"))
	}
	events = append(events, chunk(`{}`, `"stop"`),
		`data: {"id":"chatcmpl-s","object":"chat.completion.chunk","model":"gpt-4o-mini-2024-07-18","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":4,"total_tokens":16}}`+"\n\n",
		"data: [DONE]\n\n")
	for _, ev := range events {
		if _, err := io.WriteString(w, ev); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		if !sleep(r.Context(), 2*time.Millisecond) {
			return
		}
	}
}

// sleep waits d unless ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
