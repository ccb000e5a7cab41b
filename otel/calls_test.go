package otel_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	llmotel "github.com/llmclient/llmclient/otel"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/routing"
)

var durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}

func TestSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		p := fake.New(fake.Reply("hi").Usage(10, 5).Latency(time.Second))
		var callID atomic.Uint64
		c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: []string{"sk-secret"}}), keepCallID(&callID))
		ctx, root := r.root(context.Background())
		req := chatReq("m")
		req.MaxTokens = 100
		temp := 0.5
		req.Temperature = &temp
		t0 := time.Now()
		_, err := c.Complete(ctx, req)
		root.End()
		require.NoError(t, err)

		call := r.one(t, "chat m")
		assert.Equal(t, trace.SpanKindClient, call.SpanKind)
		assert.Equal(t, r.one(t, "caller").SpanContext.SpanID(), call.Parent.SpanID(), "the caller's span is the parent")
		assert.Equal(t, t0, call.StartTime)
		assert.Equal(t, t0.Add(time.Second), call.EndTime)
		assert.Equal(t, codes.Unset, call.Status.Code)
		assert.Equal(t, map[string]any{
			"gen_ai.operation.name":          "chat",
			"gen_ai.provider.name":           "fake",
			"gen_ai.request.model":           "m",
			"gen_ai.request.max_tokens":      int64(100),
			"gen_ai.request.temperature":     0.5,
			"gen_ai.response.model":          "m",
			"gen_ai.response.finish_reasons": []string{"stop"},
			"gen_ai.usage.input_tokens":      int64(10),
			"gen_ai.usage.output_tokens":     int64(5),
			"llmclient.upstream":             "a",
			"llmclient.attempts":             int64(1),
			"llmclient.call_id":              int64(callID.Load()),
		}, attrs(call.Attributes))

		kids := r.childrenOf(call)
		require.Len(t, kids, 1)
		at := kids[0]
		assert.Equal(t, "attempt a", at.Name)
		assert.Equal(t, trace.SpanKindInternal, at.SpanKind)
		assert.Equal(t, t0, at.StartTime)
		assert.Equal(t, t0.Add(time.Second), at.EndTime)
		assert.Equal(t, map[string]any{
			"gen_ai.operation.name":      "chat",
			"gen_ai.provider.name":       "fake",
			"gen_ai.request.model":       "m",
			"gen_ai.usage.input_tokens":  int64(10),
			"gen_ai.usage.output_tokens": int64(5),
			"http.response.status_code":  int64(200),
			"llmclient.upstream":         "a",
			"llmclient.attempt":          int64(1),
			"llmclient.key":              "key#1",
		}, attrs(at.Attributes))
		for _, s := range r.spans.GetSpans() {
			for _, kv := range s.Attributes {
				assert.NotContains(t, kv.Value.Emit(), "sk-secret")
			}
		}

		ms := r.collect(t)
		callAttrs := map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "fake",
			"llmclient.upstream": "a", "gen_ai.request.model": "m", "gen_ai.response.model": "m"}
		d := histF(t, ms, "gen_ai.client.operation.duration")
		require.Len(t, d, 1)
		assert.Equal(t, callAttrs, setAttrs(d[0].Attributes))
		assert.Equal(t, uint64(1), d[0].Count)
		assert.Equal(t, 1.0, d[0].Sum)
		assert.Equal(t, durationBuckets, d[0].Bounds)
		assert.Equal(t, "s", ms["gen_ai.client.operation.duration"].Unit)

		tok := wrapHI(histI(t, ms, "gen_ai.client.token.usage"))
		in := matching(tok, map[string]any{"gen_ai.token.type": "input"})
		out := matching(tok, map[string]any{"gen_ai.token.type": "output"})
		require.Len(t, in, 1)
		require.Len(t, out, 1)
		assert.Equal(t, int64(10), in[0].Sum)
		assert.Equal(t, int64(5), out[0].Sum)
		assert.Equal(t, []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}, in[0].Bounds)
		assert.Equal(t, "{token}", ms["gen_ai.client.token.usage"].Unit)

		att := sumI(t, ms, "llmclient.client.attempts")
		require.Len(t, att, 1)
		assert.Equal(t, int64(1), att[0].Value)
		assert.Equal(t, map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "fake",
			"llmclient.upstream": "a", "gen_ai.request.model": "m", "http.response.status_code": int64(200)},
			setAttrs(att[0].Attributes))
		apc := histI(t, ms, "llmclient.client.attempts_per_call")
		require.Len(t, apc, 1)
		assert.Equal(t, int64(1), apc[0].Sum)
		assert.NotContains(t, ms, "llmclient.limiter.wait", "no attempt waited")
		assert.NotContains(t, ms, "gen_ai.client.operation.time_to_first_chunk", "not a stream")
		assert.NotContains(t, ms, "llmclient.client.refusals")
	})
}

// A retried attempt: two attempt spans, the first failed, the second marked as a retry
// after its backoff; the metrics count both upstream calls and one logical call.
func TestRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		p := fake.New(fake.Fail(503).Latency(100*time.Millisecond), fake.Reply("ok"))
		c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p}),
			llmclient.WithBackoff(time.Second, time.Second))
		t0 := time.Now()
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)

		call := r.one(t, "chat m")
		assert.True(t, call.Parent.SpanID() == trace.SpanID{}, "no caller span: a root")
		assert.Equal(t, int64(2), attrs(call.Attributes)["llmclient.attempts"])
		assert.Equal(t, codes.Unset, call.Status.Code)
		kids := r.childrenOf(call)
		require.Len(t, kids, 2)
		first, second := attrs(kids[0].Attributes), attrs(kids[1].Attributes)
		assert.Equal(t, "overloaded", first["error.type"])
		assert.Equal(t, int64(503), first["http.response.status_code"])
		assert.Equal(t, codes.Error, kids[0].Status.Code)
		assert.Contains(t, kids[0].Status.Description, "503")
		assert.Equal(t, t0.Add(100*time.Millisecond), kids[0].EndTime)
		assert.Nil(t, first["llmclient.retry"])
		assert.Equal(t, true, second["llmclient.retry"])
		assert.Equal(t, int64(2), second["llmclient.attempt"])
		waited, ok := second["llmclient.waited"].(float64)
		require.True(t, ok)
		assert.InDelta(t, 1.0, waited, 0.5, "the backoff, ±50% jitter")
		assert.Equal(t, kids[0].EndTime.Add(time.Duration(waited*float64(time.Second))).Round(time.Millisecond),
			kids[1].StartTime.Round(time.Millisecond), "the second attempt starts after the backoff")
		assert.Nil(t, second["error.type"])

		ms := r.collect(t)
		att := wrapI(sumI(t, ms, "llmclient.client.attempts"))
		failed := matching(att, map[string]any{"error.type": "overloaded", "http.response.status_code": int64(503)})
		require.Len(t, failed, 1)
		assert.Equal(t, int64(1), failed[0].Value)
		ok200 := matching(att, map[string]any{"http.response.status_code": int64(200)})
		require.Len(t, ok200, 1)
		assert.Equal(t, int64(1), ok200[0].Value)
		apc := histI(t, ms, "llmclient.client.attempts_per_call")
		require.Len(t, apc, 1)
		assert.Equal(t, int64(2), apc[0].Sum)
		d := histF(t, ms, "gen_ai.client.operation.duration")
		require.Len(t, d, 1)
		assert.NotContains(t, setAttrs(d[0].Attributes), "error.type", "the call succeeded")
	})
}

// A failover: the attempt on the second upstream is marked, the call span has a failover
// event and is served by the second upstream.
func TestFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		a := fake.New(fake.Fail(500))
		b := fake.New(fake.Reply("ok").Usage(3, 1))
		c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: a}),
			llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: b}), llmclient.WithMaxAttempts(1))
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)

		call := r.one(t, "chat m")
		ca := attrs(call.Attributes)
		assert.Equal(t, "b", ca["llmclient.upstream"])
		assert.Equal(t, int64(2), ca["llmclient.attempts"])
		require.Len(t, call.Events, 1)
		ev := call.Events[0]
		assert.Equal(t, "llmclient.failover", ev.Name)
		assert.Equal(t, map[string]any{"llmclient.upstream": "a", "llmclient.target": "b", "error.type": "server_error"},
			attrs(ev.Attributes))
		kids := r.childrenOf(call)
		require.Len(t, kids, 2)
		assert.Equal(t, "attempt a", kids[0].Name)
		assert.Equal(t, "attempt b", kids[1].Name)
		assert.Nil(t, attrs(kids[0].Attributes)["llmclient.failover"])
		assert.Equal(t, true, attrs(kids[1].Attributes)["llmclient.failover"])
		assert.Nil(t, attrs(kids[1].Attributes)["llmclient.retry"], "a failover is not a retry")

		ms := r.collect(t)
		f := sumI(t, ms, "llmclient.client.failovers")
		require.Len(t, f, 1)
		assert.Equal(t, int64(1), f[0].Value)
		assert.Equal(t, map[string]any{"llmclient.upstream": "a", "llmclient.target": "b", "error.type": "server_error"},
			setAttrs(f[0].Attributes))
		d := histF(t, ms, "gen_ai.client.operation.duration")
		require.Len(t, d, 1)
		assert.Equal(t, "b", setAttrs(d[0].Attributes)["llmclient.upstream"])
	})
}

// A failed call: the call span's status is an error with error.type, and so are the

// A hedged call: the hedge is a span event and a counter, the hedged attempt is marked.
func TestHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		a := fake.New(fake.Reply("late").Latency(time.Hour))
		b := fake.New(fake.Reply("ok").Usage(3, 1))
		c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: a}),
			llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: b}),
			llmclient.WithHedging("", routing.Hedge{On: true, Delay: time.Second}))
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)

		call := r.one(t, "chat m")
		assert.Equal(t, "b", attrs(call.Attributes)["llmclient.upstream"])
		require.Len(t, call.Events, 1)
		assert.Equal(t, "llmclient.hedge", call.Events[0].Name)
		assert.Equal(t, map[string]any{"llmclient.upstream": "a", "llmclient.target": "b"}, attrs(call.Events[0].Attributes))
		kids := r.childrenOf(call)
		require.Len(t, kids, 2)
		assert.Equal(t, "attempt a", kids[0].Name)
		assert.Equal(t, "canceled", attrs(kids[0].Attributes)["error.type"])
		assert.Nil(t, attrs(kids[0].Attributes)["llmclient.hedge"])
		assert.Equal(t, true, attrs(kids[1].Attributes)["llmclient.hedge"])

		h := sumI(t, r.collect(t), "llmclient.client.hedges")
		require.Len(t, h, 1)
		assert.Equal(t, int64(1), h[0].Value)
		assert.Equal(t, map[string]any{"llmclient.upstream": "a", "llmclient.target": "b"}, setAttrs(h[0].Attributes))
	})
}

// duration's attributes; local refusals of an open breaker are counted with their reason.
func TestFailedCallAndRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		p := fake.New(fake.Fail(500).Forever())
		c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p}), llmclient.WithMaxAttempts(1),
			llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 1}))
		_, err := c.Complete(context.Background(), chatReq("m"))
		require.Error(t, err)
		_, err = c.Complete(context.Background(), chatReq("m"))
		require.ErrorIs(t, err, llmclient.ErrCircuitOpen)

		calls := r.named("chat m")
		require.Len(t, calls, 2)
		assert.Equal(t, codes.Error, calls[0].Status.Code)
		assert.Equal(t, "server_error", attrs(calls[0].Attributes)["error.type"])
		assert.Equal(t, "unavailable", attrs(calls[1].Attributes)["error.type"])
		refused := r.childrenOf(calls[1])
		require.Len(t, refused, 1)
		assert.Equal(t, true, attrs(refused[0].Attributes)["llmclient.local"])
		assert.Equal(t, refused[0].StartTime, refused[0].EndTime)

		ms := r.collect(t)
		d := wrapHF(histF(t, ms, "gen_ai.client.operation.duration"))
		assert.Len(t, matching(d, map[string]any{"error.type": "server_error"}), 1)
		assert.Len(t, matching(d, map[string]any{"error.type": "unavailable"}), 1)
		ref := sumI(t, ms, "llmclient.client.refusals")
		require.Len(t, ref, 1)
		assert.Equal(t, map[string]any{"llmclient.upstream": "a", "error.type": "unavailable", "llmclient.reason": "breaker_open"},
			setAttrs(ref[0].Attributes))
		tr := sumI(t, ms, "llmclient.breaker.transitions")
		require.Len(t, tr, 1)
		assert.Equal(t, map[string]any{"llmclient.upstream": "a", "llmclient.breaker.state": "open"}, setAttrs(tr[0].Attributes))
		att := sumI(t, ms, "llmclient.client.attempts")
		require.Len(t, att, 1, "the refusal is no upstream call")
		assert.Equal(t, int64(1), att[0].Value)
	})
}

// A call the Client refuses before any attempt still gets its span, ended by the
// middleware with the error.
func TestRefusedBeforeAttempts(t *testing.T) {
	r := newRig(t)
	c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New()}))
	_, err := c.Complete(context.Background(), &llmclient.Request{Model: "m"})
	require.Error(t, err)
	call := r.one(t, "chat m")
	assert.Equal(t, codes.Error, call.Status.Code)
	assert.Equal(t, "bad_request", attrs(call.Attributes)["error.type"])
	assert.Empty(t, r.childrenOf(call))
	_, err = c.Stream(context.Background(), nil)
	require.Error(t, err)
	assert.Len(t, r.named("chat"), 1, "a nil request: no model")
}

// The observer gets the caller's context values, and the call span in it.
func TestObserverSeesCallerContext(t *testing.T) {
	type key struct{}
	r := newRig(t)
	var seen []any
	var spans []trace.SpanID
	obs := func(ctx context.Context, e llmclient.Event) {
		r.tel.Observe(ctx, e)
		if e.Kind == event.Attempt || e.Kind == event.Call {
			seen = append(seen, ctx.Value(key{}))
			spans = append(spans, trace.SpanFromContext(ctx).SpanContext().SpanID())
		}
	}
	c, err := llmclient.New(llmclient.WithObserver(obs), llmclient.WithMiddleware(r.tel.Middleware),
		llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Reply("ok"))}))
	require.NoError(t, err)
	ctx := context.WithValue(context.Background(), key{}, "request-7")
	_, err = c.Complete(ctx, chatReq("m"))
	require.NoError(t, err)
	assert.Equal(t, []any{"request-7", "request-7"}, seen)
	call := r.one(t, "chat m")
	assert.Equal(t, []trace.SpanID{call.SpanContext.SpanID(), call.SpanContext.SpanID()}, spans)
}

// Without Middleware or Transport, Observe records metrics and makes no spans.
func TestMetricsOnly(t *testing.T) {
	r := newRig(t, llmotel.WithProviderName(func(up string) string { return "acme." + up }))
	c, err := llmclient.New(llmclient.WithObserver(r.tel.Observe),
		llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Reply("ok"))}))
	require.NoError(t, err)
	_, err = c.Complete(context.Background(), chatReq("m"))
	require.NoError(t, err)
	assert.Empty(t, r.spans.GetSpans())
	d := histF(t, r.collect(t), "gen_ai.client.operation.duration")
	require.Len(t, d, 1)
	assert.Equal(t, "acme.a", setAttrs(d[0].Attributes)["gen_ai.provider.name"], "WithProviderName")
}

// Without Watch and WithProviderName, the provider is _OTHER.
func TestUnknownProvider(t *testing.T) {
	r := newRig(t)
	c, err := llmclient.New(llmclient.WithObserver(r.tel.Observe),
		llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Reply("ok"))}))
	require.NoError(t, err)
	_, err = c.Complete(context.Background(), chatReq("m"))
	require.NoError(t, err)
	d := histF(t, r.collect(t), "gen_ai.client.operation.duration")
	require.Len(t, d, 1)
	assert.Equal(t, "_OTHER", setAttrs(d[0].Attributes)["gen_ai.provider.name"])
}

// Key evictions, alerts and fallbacks are events of the call span and counters.
func TestDecisionEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		p := fake.New(fake.Fail(401))
		fallback := func(ctx context.Context, req *llmclient.Request, err error) (*llmclient.Response, error) {
			return &llmclient.Response{Text: "sorry", FinishReason: finish.Stop}, nil
		}
		c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: []string{"sk-1"}}),
			llmclient.WithFallback(fallback), llmclient.WithDecision(failure.Auth,
				func() llmclient.Decision {
					d := llmclient.DefaultDecision(failure.Auth)
					d.Failover = true
					return d
				}()))
		resp, err := c.Complete(context.Background(), chatReq("m"))
		require.NoError(t, err)
		require.True(t, resp.Fallback)
		call := r.one(t, "chat m")
		var names []string
		for _, e := range call.Events {
			names = append(names, e.Name)
		}
		assert.Equal(t, []string{"llmclient.key_evicted", "llmclient.alert", "llmclient.fallback"}, names)
		assert.Equal(t, "key#1", attrs(call.Events[0].Attributes)["llmclient.key"])
		assert.NotEmpty(t, attrs(call.Events[0].Attributes)["llmclient.until"])
		assert.Equal(t, true, attrs(call.Attributes)["llmclient.fallback"])
		ms := r.collect(t)
		for _, name := range []string{"llmclient.key.evictions", "llmclient.alerts", "llmclient.client.fallbacks"} {
			s := sumI(t, ms, name)
			require.Len(t, s, 1, name)
			assert.Equal(t, int64(1), s[0].Value, name)
			assert.Equal(t, "auth", setAttrs(s[0].Attributes)["error.type"], name)
		}
	})
}

// An attempt that waited for the limiter records its wait, on its span and in
// llmclient.limiter.wait.
func TestLimiterWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		p := fake.New(fake.Reply("ok").Times(2))
		c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Keys: []string{"sk-1"},
			Limits: llmclient.Limits{RPM: 6}})) // one request per 10s
		for range 2 {
			_, err := c.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
		}
		calls := r.named("chat m")
		require.Len(t, calls, 2)
		kids := r.childrenOf(calls[1])
		require.Len(t, kids, 1)
		assert.Equal(t, 10.0, attrs(kids[0].Attributes)["llmclient.limiter_wait"])
		assert.Equal(t, 10*time.Second, kids[0].EndTime.Sub(kids[0].StartTime), "the wait is inside the attempt span")
		w := histF(t, r.collect(t), "llmclient.limiter.wait")
		require.Len(t, w, 1)
		assert.Equal(t, uint64(1), w[0].Count)
		assert.Equal(t, 10.0, w[0].Sum)
		assert.Equal(t, map[string]any{"llmclient.upstream": "a", "llmclient.key": "key#1"}, setAttrs(w[0].Attributes))
	})
}

// Unsampled calls make no spans and still record every metric.
func TestUnsampled(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()), sdktrace.WithSyncer(exp))
	reader := sdkmetric.NewManualReader()
	tel, err := llmotel.New(llmotel.WithTracerProvider(tp),
		llmotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	require.NoError(t, err)
	c, err := llmclient.New(llmclient.WithObserver(tel.Observe), llmclient.WithMiddleware(tel.Middleware),
		llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Fail(500), fake.Reply("ok"))}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: fake.New(fake.Stream("x", "y"))}),
		llmclient.WithMaxAttempts(1), llmclient.WithBackoff(time.Millisecond, time.Millisecond))
	require.NoError(t, err)
	_, err = c.Complete(context.Background(), chatReq("m"))
	require.NoError(t, err)
	s, err := c.Stream(context.Background(), chatReq("m"))
	require.NoError(t, err)
	for s.Next() {
	}
	s.Close()
	assert.Empty(t, exp.GetSpans())
	r := &rig{reader: reader}
	d := histF(t, r.collect(t), "gen_ai.client.operation.duration")
	var n uint64
	for _, p := range d {
		n += p.Count
	}
	assert.Equal(t, uint64(2), n)
}

// A Client without Middleware called inside another's call (here, by its fallback
// function) does not end or add to the outer call's span.
func TestNestedClientKeepsItsOwnEvents(t *testing.T) {
	r := newRig(t)
	inner, err := llmclient.New(llmclient.WithObserver(r.tel.Observe),
		llmclient.WithUpstream(llmclient.Upstream{Name: "inner", Provider: fake.New(fake.Reply("a"), fake.Reply("b"))}))
	require.NoError(t, err)
	_, err = inner.Complete(context.Background(), chatReq("m")) // call ID 1 is used up
	require.NoError(t, err)
	fallback := func(ctx context.Context, req *llmclient.Request, _ error) (*llmclient.Response, error) {
		return inner.Complete(ctx, req)
	}
	var outerID atomic.Uint64
	outer := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "outer", Provider: fake.New(fake.Fail(500))}),
		llmclient.WithMaxAttempts(1), llmclient.WithFallback(fallback), keepCallID(&outerID))
	_, err = outer.Complete(context.Background(), chatReq("m"))
	require.NoError(t, err)
	call := r.one(t, "chat m")
	assert.Equal(t, int64(outerID.Load()), attrs(call.Attributes)["llmclient.call_id"], "ended by the outer call's end")
	assert.Equal(t, true, attrs(call.Attributes)["llmclient.fallback"], "still open after the inner call ended")
	kids := r.childrenOf(call)
	require.Len(t, kids, 1, "the inner call's attempt is not the outer's")
	assert.Equal(t, "attempt outer", kids[0].Name)
}
