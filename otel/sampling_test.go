package otel_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmclient/llmclient"
	llmotel "github.com/llmclient/llmclient/otel"
	"github.com/llmclient/llmclient/provider/fake"
)

// dropNamed samples every span but those called name.
type dropNamed string

func (d dropNamed) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if p.Name == string(d) {
		return sdktrace.SamplingResult{Decision: sdktrace.Drop}
	}
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
}

func (d dropNamed) Description() string { return "dropNamed" }

// A call whose span is not recorded, made inside a recorded call of the same Telemetry
// (here by the outer call's fallback function, through a Client with Middleware), neither ends the outer span nor adds its
// attempts to it, and still records its metrics.
func TestUnsampledCallInsideRecordedCall(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(dropNamed("chat inner-model")), sdktrace.WithSyncer(exp))
	reader := sdkmetric.NewManualReader()
	tel, err := llmotel.New(llmotel.WithTracerProvider(tp),
		llmotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	require.NoError(t, err)
	r := &rig{tel: tel, spans: exp, reader: reader, tp: tp}

	inner, err := llmclient.New(llmclient.WithObserver(tel.Observe), llmclient.WithMiddleware(tel.Middleware),
		llmclient.WithUpstream(llmclient.Upstream{Name: "inner", Provider: fake.New(fake.Reply("a"))}))
	require.NoError(t, err)
	fallback := func(ctx context.Context, req *llmclient.Request, _ error) (*llmclient.Response, error) {
		return inner.Complete(ctx, chatReq("inner-model"))
	}
	var outerID atomic.Uint64
	outer, err := llmclient.New(llmclient.WithObserver(tel.Observe), llmclient.WithMiddleware(tel.Middleware),
		llmclient.WithUpstream(llmclient.Upstream{Name: "outer", Provider: fake.New(fake.Fail(500))}),
		llmclient.WithMaxAttempts(1), llmclient.WithFallback(fallback), keepCallID(&outerID))
	require.NoError(t, err)
	_, err = outer.Complete(context.Background(), chatReq("m"))
	require.NoError(t, err)

	assert.Empty(t, r.named("chat inner-model"))
	call := r.one(t, "chat m")
	assert.Equal(t, int64(outerID.Load()), attrs(call.Attributes)["llmclient.call_id"])
	assert.Equal(t, true, attrs(call.Attributes)["llmclient.fallback"], "ended by the outer call, after the inner one")
	kids := r.childrenOf(call)
	require.Len(t, kids, 1, "the inner call's attempt is not the outer's")
	assert.Equal(t, "attempt outer", kids[0].Name)

	d := histF(t, r.collect(t), "gen_ai.client.operation.duration")
	assert.Len(t, matching(wrapHF(d), map[string]any{"llmclient.upstream": "inner", "gen_ai.request.model": "inner-model"}), 1,
		"the unrecorded call's metrics")
}

// Each request gets the start attributes of its own parameters, though they are made
// once per model and parameters.
func TestStartAttributesPerRequest(t *testing.T) {
	r := newRig(t)
	c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Reply("x"), fake.Reply("y"),
		fake.Reply("z"), fake.Reply("w"))}))
	low, high := 0.1, 0.9
	reqs := []*llmclient.Request{chatReq("m"), chatReq("m"), chatReq("m"), chatReq("n")}
	reqs[1].Temperature, reqs[1].MaxTokens = &low, 10
	reqs[2].Temperature, reqs[2].TopP = &high, &low
	for _, req := range reqs {
		_, err := c.Complete(context.Background(), req)
		require.NoError(t, err)
	}
	spans := append(r.named("chat m"), r.named("chat n")...)
	require.Len(t, spans, 4)
	want := []map[string]any{
		{},
		{"gen_ai.request.temperature": 0.1, "gen_ai.request.max_tokens": int64(10)},
		{"gen_ai.request.temperature": 0.9, "gen_ai.request.top_p": 0.1},
		{},
	}
	for i, s := range spans {
		got := attrs(s.Attributes)
		for _, k := range []string{"gen_ai.request.temperature", "gen_ai.request.max_tokens", "gen_ai.request.top_p"} {
			v, ok := want[i][k]
			if !ok {
				assert.NotContains(t, got, k, "span %d", i)
				continue
			}
			assert.Equal(t, v, got[k], "span %d: %s", i, k)
		}
		assert.Equal(t, reqs[i].Model, got["gen_ai.request.model"])
	}
}

// seenAtStart samples every span and keeps the attributes each CLIENT span showed its
// sampler at its start.
type seenAtStart struct {
	mu   sync.Mutex
	seen []map[string]any
}

func (s *seenAtStart) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if p.Kind == trace.SpanKindClient {
		s.mu.Lock()
		s.seen = append(s.seen, attrs(p.Attributes))
		s.mu.Unlock()
	}
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
}

func (s *seenAtStart) Description() string { return "seenAtStart" }

// A sampler sees, at the call span's start, the sampling-relevant attributes the GenAI
// conventions ask for that are known then (the operation and the model); the request's
// parameters are on the recorded span.
func TestSamplerSeesOperationAndModel(t *testing.T) {
	sampler := &seenAtStart{}
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithSyncer(exp))
	tel, err := llmotel.New(llmotel.WithTracerProvider(tp),
		llmotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))))
	require.NoError(t, err)
	c, err := llmclient.New(llmclient.WithObserver(tel.Observe), llmclient.WithMiddleware(tel.Middleware),
		llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Reply("x"))}))
	require.NoError(t, err)
	req, temp := chatReq("m"), 0.3
	req.Temperature, req.MaxTokens = &temp, 64
	_, err = c.Complete(context.Background(), req)
	require.NoError(t, err)

	sampler.mu.Lock()
	defer sampler.mu.Unlock()
	require.Len(t, sampler.seen, 1)
	assert.Equal(t, map[string]any{"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}, sampler.seen[0])
	r := &rig{spans: exp}
	got := attrs(r.one(t, "chat m").Attributes)
	assert.Equal(t, 0.3, got["gen_ai.request.temperature"])
	assert.Equal(t, int64(64), got["gen_ai.request.max_tokens"])
}

// An unrecorded stream records its metrics when it ends, after Stream returned.
func TestUnsampledStreamMetrics(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	reader := sdkmetric.NewManualReader()
	tel, err := llmotel.New(llmotel.WithTracerProvider(tp),
		llmotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	require.NoError(t, err)
	c, err := llmclient.New(llmclient.WithObserver(tel.Observe), llmclient.WithMiddleware(tel.Middleware),
		llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Stream("x", "y", "z"))}))
	require.NoError(t, err)
	s, err := c.Stream(context.Background(), chatReq("m"))
	require.NoError(t, err)
	r := &rig{reader: reader}
	_, ok := r.collect(t)["gen_ai.client.operation.time_to_first_chunk"]
	assert.False(t, ok, "nothing before the stream is read")
	for s.Next() {
	}
	require.NoError(t, s.Close())
	ms := r.collect(t)
	ttfc := histF(t, ms, "gen_ai.client.operation.time_to_first_chunk")
	require.Len(t, ttfc, 1)
	assert.Equal(t, uint64(1), ttfc[0].Count)
	assert.Equal(t, "chat", setAttrs(ttfc[0].Attributes)["gen_ai.operation.name"])
	tpoc := histF(t, ms, "gen_ai.client.operation.time_per_output_chunk")
	require.Len(t, tpoc, 1)
	assert.Equal(t, uint64(3), tpoc[0].Count, "every chunk after the first (three of text, one that ends the stream)")
}
