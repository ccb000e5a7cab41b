package otel_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/provider/openai"
)

// The caller's own observer (a logger, given before tel.Observe) panics on an event of
// the call, and the panic reaches the caller, who recovers (net/http does): the call span
// ends all the same, as failed, and the panic goes on unchanged.
func TestObserverPanicEndsCallSpan(t *testing.T) {
	for _, tc := range []struct {
		name   string
		kind   event.Kind
		stream bool
	}{
		{"complete/attempt", event.Attempt, false},
		{"complete/call", event.Call, false},
		{"stream/attempt", event.Attempt, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			panicky := func(_ context.Context, e llmclient.Event) {
				if e.Kind == tc.kind {
					panic("logger bug")
				}
			}
			p := fake.New(fake.Reply("hi").Forever())
			if tc.stream { // a failed first attempt reports its event before Stream returns
				p = fake.New(fake.Fail(500), fake.Stream("hi").Forever())
			}
			c, err := llmclient.New(llmclient.WithObserver(panicky), llmclient.WithObserver(r.tel.Observe),
				llmclient.WithMiddleware(r.tel.Middleware), llmclient.WithBackoff(time.Millisecond, time.Millisecond),
				llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p}))
			require.NoError(t, err)
			func() {
				defer func() { require.Equal(t, "logger bug", recover()) }()
				if tc.stream {
					_, _ = c.Stream(context.Background(), chatReq("m"))
				} else {
					_, _ = c.Complete(context.Background(), chatReq("m"))
				}
			}()
			require.NoError(t, c.Close())
			call := r.one(t, "chat m")
			require.Equal(t, codes.Error, call.Status.Code)
			require.Equal(t, "panic", call.Status.Description)
			require.Equal(t, "_OTHER", attrs(call.Attributes)["error.type"])
		})
	}
}

// Transport mode: a streamed body's end (read to its end, or closed before) sends the
// call's event.Call from the reader's Read or Close, after RoundTrip returned. An
// observer before tel.Observe that panics on it used to leave the call span open for the
// process's life (no event ends it, and nothing collects it); the span ends then, as
// failed, and the panic reaches the reader unchanged.
func TestObserverPanicEndsTransportCallSpan(t *testing.T) {
	for _, mode := range []string{"read", "closed"} {
		t.Run(mode, func(t *testing.T) {
			r := newRig(t)
			srv := openAIServer(t)
			p, err := openai.New(openai.WithBaseURL(srv.URL + "/v1"))
			require.NoError(t, err)
			panicky := func(_ context.Context, e llmclient.Event) {
				if e.Kind == event.Call {
					panic("logger bug")
				}
			}
			c, err := llmclient.New(llmclient.WithObserver(panicky), llmclient.WithObserver(r.tel.Observe),
				llmclient.WithUpstream(llmclient.Upstream{Name: "oai", Provider: p, Keys: []string{"sk-upstream"}}),
				llmclient.WithBackoff(time.Millisecond, 2*time.Millisecond))
			require.NoError(t, err)
			rt := r.tel.Transport(c.Transport(srv.Client().Transport))
			defer rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions",
				strings.NewReader(`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			resp, err := (&http.Client{Transport: rt}).Do(req)
			require.NoError(t, err)
			require.Empty(t, r.named("chat gpt-4o-mini"), "the call span ends with the body")
			func() {
				defer func() { require.Equal(t, "logger bug", recover()) }()
				if mode == "read" {
					_, _ = io.ReadAll(resp.Body)
				} else {
					_, _ = resp.Body.Read(make([]byte, 10))
				}
				resp.Body.Close()
			}()
			_ = resp.Body.Close()
			call := r.one(t, "chat gpt-4o-mini") // at once: no collection needed
			require.Equal(t, codes.Error, call.Status.Code)
			require.Equal(t, "panic", call.Status.Description)
			require.Equal(t, "_OTHER", attrs(call.Attributes)["error.type"])
			require.Len(t, r.childrenOf(call), 2, "the attempts, the first failed with a 500")
		})
	}
}

// A typed stream: its end sends the call's event.Call from Next (read to its end) or from
// Close (closed during a continuation), where no otel code is on the stack. An observer
// before Observe that panics on it used to leave the call span open until the call's
// state was collected, or end it as canceled at a later Close; the span ends as the panic
// passes, as failed, and the panic reaches the reader unchanged.
func TestObserverPanicEndsTypedStreamCallSpan(t *testing.T) {
	r := newRig(t)
	panicky := func(_ context.Context, e llmclient.Event) {
		if e.Kind == event.Call {
			panic("logger bug")
		}
	}
	c, err := llmclient.New(llmclient.WithObserver(panicky), llmclient.WithObserver(r.tel.Observe),
		llmclient.WithMiddleware(r.tel.Middleware),
		llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Stream("hel", "lo").Forever())}))
	require.NoError(t, err)
	s, err := c.Stream(context.Background(), chatReq("m"))
	require.NoError(t, err)
	func() {
		defer func() { require.Equal(t, "logger bug", recover()) }()
		for s.Next() {
		}
	}()
	call := r.one(t, "chat m") // before any Close, and without a collection
	require.Equal(t, codes.Error, call.Status.Code)
	require.Equal(t, "panic", call.Status.Description)
	require.Equal(t, "_OTHER", attrs(call.Attributes)["error.type"])
	_ = s.Close()
	require.NoError(t, c.Close())
}
