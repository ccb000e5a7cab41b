package bench

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/ratelimiter"
	"github.com/failsafe-go/failsafe-go/timeout"
	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	llmopenai "github.com/llmclient/llmclient/provider/openai"
	"github.com/llmclient/llmclient/provider/openai/openaitest"
)

const (
	chatBody = `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello to the team and wish them a good week."}],"max_tokens":64}`
	chatOK   = `{"id":"c1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello, team!"},"finish_reason":"stop"}],"usage":{"prompt_tokens":25,"completion_tokens":4,"total_tokens":29}}`
)

// static answers every request at once from memory, reading and closing its body as a
// real transport does: the base both contenders wrap.
type static struct{}

func (static) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(chatOK)), ContentLength: int64(len(chatOK)), Request: req}, nil
}

// transportContenders returns the round trippers BenchmarkTransport and
// BenchmarkTransportParallel compare: the base alone, llmclient's transport over one
// upstream and over a group of two (a failover upstream that is never needed: the first
// answers), and failsafehttp.
func transportContenders(b *testing.B) []contender {
	p, err := llmopenai.New(llmopenai.WithBaseURL("http://api.test/v1"))
	if err != nil {
		b.Fatal(err)
	}
	lim := llmclient.Limits{RPM: 1 << 40, TPM: 1 << 50}
	c, err := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{Name: "oai", Provider: p, Limits: lim}),
		llmclient.WithAttemptTimeout(10*time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	backup, err := llmopenai.New(llmopenai.WithBaseURL("http://backup.test/v1"))
	if err != nil {
		b.Fatal(err)
	}
	c2, err := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{Name: "oai", Provider: p, Limits: lim}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "backup", Provider: backup, Limits: lim}),
		llmclient.WithModelGroup("gpt-4o-mini", "oai", "backup"), llmclient.WithAttemptTimeout(10*time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	// The same protection as failsafehttp's below: retry, breaker, a request rate limit
	// and a timeout, and no token limit (so no body scan for tokens, no estimate, no usage
	// read).
	crpm, err := llmclient.New(llmclient.WithUpstream(llmclient.Upstream{Name: "oai", Provider: p, Limits: llmclient.Limits{RPM: 1 << 40}}),
		llmclient.WithAttemptTimeout(10*time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	rp := failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(2).WithBackoff(500*time.Millisecond, 30*time.Second).Build()
	cb := circuitbreaker.NewBuilder[*http.Response]().WithFailureThresholdRatio(10, 20).WithDelay(15 * time.Second).Build()
	rl := ratelimiter.NewBursty[*http.Response](1<<31, time.Second)
	to := timeout.New[*http.Response](10 * time.Minute)
	return []contender{
		{"base", static{}},
		{"llmclient", c.Transport(static{})},
		{"llmclient-failover", c2.Transport(static{})},
		{"llmclient-rpm", crpm.Transport(static{})},
		{"failsafehttp", failsafehttp.NewRoundTripper(static{}, rp, cb, rl, to)},
	}
}

type contender struct {
	name string
	rt   http.RoundTripper
}

// roundTrip sends one chat request through rt and reads its answer.
func roundTrip(b *testing.B, rt http.RoundTripper) {
	req, _ := http.NewRequest(http.MethodPost, "http://api.test/v1/chat/completions", strings.NewReader(chatBody))
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}

// BenchmarkTransport measures what each contender adds above its base RoundTripper for a
// one-shot chat request: llmclient's transport with its retry, breaker, limiter (RPM and
// TPM, so the body is inspected and estimated) and an attempt timeout, against
// failsafehttp with retry, circuit breaker, rate limiter and timeout.
func BenchmarkTransport(b *testing.B) {
	for _, tc := range transportContenders(b) {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				roundTrip(b, tc.rt)
			}
		})
	}
}

// BenchmarkTransportParallel is BenchmarkTransport from GOMAXPROCS goroutines at once.
func BenchmarkTransportParallel(b *testing.B) {
	for _, tc := range transportContenders(b) {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					roundTrip(b, tc.rt)
				}
			})
		})
	}
}

var _ failsafe.Policy[*http.Response] = timeout.New[*http.Response](time.Second)

const streamReq = `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Say hello."}]}`

// sseBase answers from memory with an event stream: whole from every host but cutHost,
// which sends only the first cut bytes of it (then the connection ends).
type sseBase struct {
	whole   []byte
	cutHost string
	cut     int
}

func (s sseBase) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	body := s.whole
	if req.URL.Host == s.cutHost {
		body = body[:s.cut]
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(strings.NewReader(string(body))), ContentLength: -1, Request: req}, nil
}

// BenchmarkTransportStream reads a 200-chunk chat completion stream through the transport
// (the body guarded, decoded and passed through): uncut, as the default does it and with
// WithStreamContinuation(false); and cut after half its chunks, continued on a second
// upstream (restart and splice), which gives the extra cost of a continued stream in
// transport mode beside the uncut one.
func BenchmarkTransportStream(b *testing.B) {
	whole := openaitest.ChatStream(200)
	cut := cutAfterChunks(whole, 100)
	mk := func(on, group bool, cutHost string) http.RoundTripper {
		p, err := llmopenai.New(llmopenai.WithBaseURL("http://api.test/v1"))
		if err != nil {
			b.Fatal(err)
		}
		backup, err := llmopenai.New(llmopenai.WithBaseURL("http://backup.test/v1"))
		if err != nil {
			b.Fatal(err)
		}
		opts := []llmclient.Option{llmclient.WithUpstream(llmclient.Upstream{Name: "oai", Provider: p}),
			llmclient.WithStreamContinuation(on)}
		if group {
			// The cut upstream's breaker never opens: every iteration is cut and continued.
			opts = append(opts, llmclient.WithUpstream(llmclient.Upstream{Name: "backup", Provider: backup}),
				llmclient.WithModelGroup("gpt-4o-mini", "oai", "backup"),
				llmclient.WithBreaker(breaker.Config{MinRequests: 1 << 30, ConsecutiveFailures: 1 << 30}))
		}
		c, err := llmclient.New(opts...)
		if err != nil {
			b.Fatal(err)
		}
		return c.Transport(sseBase{whole: whole, cutHost: cutHost, cut: cut})
	}
	for _, tc := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"uncut", mk(true, false, "")},
		{"uncut-continuation-off", mk(false, false, "")},
		{"cut-continued", mk(true, true, "api.test")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(whole)))
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, "http://api.test/v1/chat/completions", strings.NewReader(streamReq))
				resp, err := tc.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				_, err = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// cutAfterChunks returns the length of the first k events of an event stream.
func cutAfterChunks(stream []byte, k int) int {
	at := 0
	for range k {
		i := strings.Index(string(stream[at:]), "\n\n")
		if i < 0 {
			return len(stream)
		}
		at += i + 2
	}
	return at
}
