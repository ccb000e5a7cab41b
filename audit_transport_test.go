package llmclient_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/provider/openai"
	"github.com/llmclient/llmclient/ratelimit"
)

// Claims of docs/transport.md where the Transport meets another feature.

// TestAuditTransportAccumulateOffEndsTheBody: "WithStreamContinuation(false) (or
// WithStreamAccumulate(false)) turns continuation off for the transport too": with
// accumulation off, a stream cut after its first token ends the body with its error and
// the next upstream is never called.
func TestAuditTransportAccumulateOffEndsTheBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first := oaiStream("s1", 100, 7, 9, "Hel", "lo")[:3]
		a := newScript(sseStep(first...))
		b := newScript(sseStep(oaiStream("s2", 200, 7, 3, "Hello", " world")...))
		_, rt := contPair(t, a, b, llmclient.WithStreamAccumulate(false))
		resp, err := post(t, context.Background(), rt, "http://a.test/v1/chat/completions", streamBody)
		if err != nil {
			t.Fatal(err)
		}
		body, err := readBody(t, resp)
		if err == nil {
			t.Errorf("a cut stream with accumulation off ended cleanly: %q", body)
		}
		if want := first[0].data + first[1].data + first[2].data; body != want {
			t.Errorf("body %q, want the first stream byte for byte %q", body, want)
		}
		if b.count() != 0 {
			t.Errorf("the next upstream was called %d times", b.count())
		}
	})
}

// TestAuditTransportNoContinuationWithoutReplayableBody: "A request body the transport
// could not buffer (over WithMaxReplayBody without GetBody): it cannot be sent again" —
// its stream, cut after the first token, is not continued, and the upstream got the whole
// body once, and the cut reads as an error, never as a clean end.
func TestAuditTransportNoContinuationWithoutReplayableBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first := oaiStream("s1", 100, 7, 9, "Hel", "lo")[:3]
		a := newScript(sseStep(first...))
		b := newScript(sseStep(oaiStream("s2", 200, 7, 3, "Hello", " world")...))
		c, _ := contPair(t, a, b)
		rt := c.Transport(memTransport{hostMux{"a.test": a, "b.test": b}}, llmclient.WithMaxReplayBody(1024))
		big := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("x", 4096) + `"}]}`
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://a.test/v1/chat/completions",
			io.NopCloser(strings.NewReader(big)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if req.GetBody != nil {
			t.Fatal("the request must have no GetBody")
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := readBody(t, resp); err == nil {
			t.Error("a cut stream that cannot be sent again ended cleanly")
		}
		if b.count() != 0 || a.count() != 1 {
			t.Errorf("calls: a %d, b %d; want a once and b never", a.count(), b.count())
		}
		if got := a.requests()[0].Body; got != big {
			t.Errorf("the upstream got %d bytes of the %d-byte body", len(got), len(big))
		}
	})
}

// TestAuditTransportLocalRefusals: "When the Client refuses a call itself … the SDK still
// gets its own error type: a 429 (rate limits, cooling keys, budgets) … or a 503
// (unavailable) in the vendor's error format, with Retry-After when the end is known and
// X-Llmclient-Class naming the class." Each case is a Client of one upstream; no refusal
// reaches the upstream.
func TestAuditTransportLocalRefusals(t *testing.T) {
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name       string
		limits     llmclient.Limits
		refuse     func(c *llmclient.Client) error
		status     int
		class      string
		retryAfter bool
	}{
		{"limiter", llmclient.Limits{RPM: 1, RequestBurst: 1}, func(*llmclient.Client) error { return nil }, 429, "rate_limited", true},
		{"drained", llmclient.Limits{}, func(c *llmclient.Client) error { return c.Drain("u", true) }, 503, "unavailable", false},
		{"forced open", llmclient.Limits{}, func(c *llmclient.Client) error { return c.ForceBreakerOpen("u") }, 503, "unavailable", false},
	} {
		synctest.Test(t, func(t *testing.T) {
			up := newScript(ok(chatOK))
			c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: oaiProvider(t, "http://u.test/v1"),
				Keys: []string{"k1"}, Limits: tc.limits}), llmclient.WithLimiterMode(ratelimit.FailFast))
			rt := c.Transport(memTransport{up})
			resp, err := post(t, context.Background(), rt, "http://u.test/v1/chat/completions", body)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s: first call: %v %v", tc.name, resp, err)
			}
			_, _ = readBody(t, resp)
			if err := tc.refuse(c); err != nil {
				t.Fatal(err)
			}
			resp, err = post(t, context.Background(), rt, "http://u.test/v1/chat/completions", body)
			if err != nil {
				t.Fatalf("%s: transport error %v, want an HTTP answer", tc.name, err)
			}
			got, _ := readBody(t, resp)
			class := resp.Header.Get("X-Llmclient-Class")
			if resp.StatusCode != tc.status || class != tc.class {
				t.Errorf("%s: %d class %q, want %d %q", tc.name, resp.StatusCode, class, tc.status, tc.class)
			}
			if tc.retryAfter && resp.Header.Get("Retry-After") == "" {
				t.Errorf("%s: the end is known, no Retry-After", tc.name)
			}
			if !strings.Contains(got, `"error"`) || strings.Contains(got, "k1") {
				t.Errorf("%s: body %q is not OpenAI's error format, or names the key", tc.name, got)
			}
			if up.count() != 1 {
				t.Errorf("%s: the upstream was called %d times, want only the first call", tc.name, up.count())
			}
		})
	}
}

// oaiProvider is an OpenAI adapter at baseURL.
func oaiProvider(t *testing.T, baseURL string) llmclient.Provider {
	t.Helper()
	p, err := openai.New(openai.WithBaseURL(baseURL))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAuditTransportCutStreamOverTheReplayLimitWithGetBody: a streaming request whose body
// is over WithMaxReplayBody but has GetBody is not read for its stream flag either; its
// answer is still decoded as the stream it is, so a cut after the first token reads as an
// error (it is not continued: the body was never inspected), not as a clean end.
func TestAuditTransportCutStreamOverTheReplayLimitWithGetBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newScript(sseStep(oaiStream("s1", 100, 7, 9, "Hel", "lo")[:3]...))
		b := newScript(sseStep(oaiStream("s2", 200, 7, 3, "Hello", " world")...))
		c, _ := contPair(t, a, b)
		rt := c.Transport(memTransport{hostMux{"a.test": a, "b.test": b}}, llmclient.WithMaxReplayBody(1024))
		big := `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("x", 4096) + `"}]}`
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://a.test/v1/chat/completions",
			strings.NewReader(big))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if req.GetBody == nil || req.ContentLength != int64(len(big)) {
			t.Fatal("the request must have GetBody and its length")
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := readBody(t, resp); err == nil {
			t.Error("a cut stream over the replay limit ended cleanly")
		}
	})
}
