package otel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/provider/fake"
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
