package otel_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/finish"
	llmotel "github.com/llmclient/llmclient/otel"
)

// noop is a provider that answers at once with a fresh response, as in the bench module:
// the benchmark measures the Client and its instrumentation, not an adapter.
type noop struct{}

func (noop) Complete(context.Context, *llmclient.Call) (*llmclient.Response, error) {
	return &llmclient.Response{Text: "ok", FinishReason: finish.Stop,
		Usage: llmclient.Usage{InputTokens: 12, OutputTokens: 3}}, nil
}

func (noop) Stream(context.Context, *llmclient.Call) (llmclient.ProviderStream, error) {
	return nil, llmclient.ErrUnsupported
}

var benchReq = &llmclient.Request{Model: "m", Messages: []llmclient.Message{llmclient.UserMessage("Say hello.")}}

// benchParamsReq is benchReq with the parameters a request often sets, which call spans
// carry: max_tokens and temperature.
var benchParamsReq = func() *llmclient.Request {
	r, temp := *benchReq, 0.7
	r.MaxTokens, r.Temperature = 256, &temp
	return &r
}()

// benchClient builds a Client with every layer active, as bench/complete_bench_test.go
// does: a key pool, RPM/TPM/concurrency limits far above what the benchmark offers.
func benchClient(b *testing.B, opts ...llmclient.Option) *llmclient.Client {
	c, err := llmclient.New(append(opts, llmclient.WithUpstream(llmclient.Upstream{
		Name: "a", Provider: noop{}, Keys: []string{"k1", "k2"},
		Limits: llmclient.Limits{RPM: 1 << 40, TPM: 1 << 50, MaxConcurrent: 1 << 20},
	}))...)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// instrumented returns the options of a Client instrumented with a real SDK meter (a
// manual reader, never collected) and tracer (sampler as given, spans to a batch
// processor with a no-op exporter), and a cleanup.
func instrumented(b *testing.B, spans bool, sampler sdktrace.Sampler) ([]llmclient.Option, func()) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	tel, err := llmotel.New(llmotel.WithMeterProvider(mp), llmotel.WithTracerProvider(tp))
	if err != nil {
		b.Fatal(err)
	}
	opts := []llmclient.Option{llmclient.WithObserver(tel.Observe)}
	if spans {
		opts = append(opts, llmclient.WithMiddleware(tel.Middleware))
	}
	return opts, func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	}
}

func BenchmarkComplete(b *testing.B) {
	ctx := context.Background()
	cases := []struct {
		name    string
		on      bool
		spans   bool
		sampler sdktrace.Sampler
		req     *llmclient.Request // benchReq if nil
	}{
		{name: "off"},
		{name: "empty-observer"},
		{name: "metrics", on: true},
		{name: "metrics+spans-unsampled", on: true, spans: true, sampler: sdktrace.NeverSample()},
		{name: "metrics+spans-sampled", on: true, spans: true, sampler: sdktrace.AlwaysSample()},
		{name: "metrics+spans-unsampled-params", on: true, spans: true, sampler: sdktrace.NeverSample(), req: benchParamsReq},
		{name: "metrics+spans-sampled-params", on: true, spans: true, sampler: sdktrace.AlwaysSample(), req: benchParamsReq},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			var opts []llmclient.Option
			if tc.on {
				sampler := tc.sampler
				if sampler == nil {
					sampler = sdktrace.NeverSample()
				}
				o, cleanup := instrumented(b, tc.spans, sampler)
				defer cleanup()
				opts = o
			}
			if tc.name == "empty-observer" {
				// What the Client itself spends on having an observer: call IDs, the events.
				opts = append(opts, llmclient.WithObserver(func(context.Context, llmclient.Event) {}))
			}
			c, req := benchClient(b, opts...), tc.req
			if req == nil {
				req = benchReq
			}
			if tc.on {
				// Let the first call fill the attribute caches.
				if _, err := c.Complete(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Complete(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCompleteParallel(b *testing.B) {
	ctx := context.Background()
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "metrics+spans-sampled"
		}
		b.Run(name, func(b *testing.B) {
			var opts []llmclient.Option
			if on {
				o, cleanup := instrumented(b, true, sdktrace.AlwaysSample())
				defer cleanup()
				opts = o
			}
			c := benchClient(b, opts...)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.Complete(ctx, benchReq); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkSDKFloor is what the SDK alone costs for the same work, for comparison: two
// sampled spans (a parent and a child) with the attributes a call and an attempt carry,
// and the four synchronous metric measurements of a successful call (its attempt is counted
// with an atomic add, as the module counts it); and, with every option and
// attribute made beforehand, what the SDK does for one call of Complete/metrics+spans-*:
// the call span, its measurements in the span's context, and (sampled) the attempt span.
func BenchmarkSDKFloor(b *testing.B) {
	ctx := context.Background()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer func() { _ = tp.Shutdown(ctx); _ = mp.Shutdown(ctx) }()
	tracer, meter := tp.Tracer("floor"), mp.Meter("floor")
	h, _ := meter.Float64Histogram("h")
	ih, _ := meter.Int64Histogram("ih")
	var attempts atomic.Int64 // llmclient.client.attempts' cell
	kvs := []attribute.KeyValue{attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", "openai"),
		attribute.String("llmclient.upstream", "a"), attribute.String("gen_ai.request.model", "m"), attribute.String("gen_ai.response.model", "m")}
	set := []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(kvs...))}
	b.Run("metrics", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			attempts.Add(1)
			h.Record(ctx, 0.5, set...)
			ih.Record(ctx, 1, set...)
			ih.Record(ctx, 12, set...)
			ih.Record(ctx, 3, set...)
		}
	})
	b.Run("two-sampled-spans", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			pctx, p := tracer.Start(ctx, "chat m", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(kvs[:2]...))
			_, s := tracer.Start(pctx, "attempt a")
			s.SetAttributes(kvs...)
			s.SetAttributes(attribute.Int("llmclient.attempt", 1), attribute.String("llmclient.key", "key#1"), attribute.Int("http.response.status_code", 200))
			s.End()
			p.SetAttributes(kvs...)
			p.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", 12), attribute.Int("gen_ai.usage.output_tokens", 3), attribute.Int("llmclient.attempts", 1))
			p.End()
		}
	})
	for _, sampled := range []bool{false, true} {
		name, sampler := "unsampled-call", sdktrace.NeverSample()
		if sampled {
			name, sampler = "sampled-call", sdktrace.AlwaysSample()
		}
		b.Run(name, func(b *testing.B) { benchmarkCallFloor(b, sampler) })
	}
}

// benchmarkCallFloor makes the SDK do what the module asks of it for one call of
// BenchmarkComplete, with the same attributes and sets, nothing built in the loop.
func benchmarkCallFloor(b *testing.B, sampler sdktrace.Sampler) {
	ctx := context.Background()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer func() { _ = tp.Shutdown(ctx); _ = mp.Shutdown(ctx) }()
	tracer, meter := tp.Tracer("floor"), mp.Meter("floor")
	dur, _ := meter.Float64Histogram("d")
	perCall, _ := meter.Int64Histogram("a")
	tokens, _ := meter.Int64Histogram("t")
	var attempts atomic.Int64 // llmclient.client.attempts' cell
	op, provider, upstream := attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", "_OTHER"), attribute.String("llmclient.upstream", "a")
	model, respModel := attribute.String("gen_ai.request.model", "m"), attribute.String("gen_ai.response.model", "m")
	status := attribute.Int("http.response.status_code", 200)
	callSet := metric.WithAttributeSet(attribute.NewSet(op, provider, upstream, model, respModel))
	in := metric.WithAttributeSet(attribute.NewSet(op, provider, upstream, model, respModel, attribute.String("gen_ai.token.type", "input")))
	out := metric.WithAttributeSet(attribute.NewSet(op, provider, upstream, model, respModel, attribute.String("gen_ai.token.type", "output")))
	recCall := []metric.RecordOption{callSet}
	recIn, recOut := []metric.RecordOption{in}, []metric.RecordOption{out}
	t0 := time.Now()
	callStart := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(op, model)}
	attemptStart := []trace.SpanStartOption{trace.WithTimestamp(t0), trace.WithSpanKind(trace.SpanKindInternal)}
	attemptEnd := []trace.SpanEndOption{trace.WithTimestamp(t0.Add(time.Microsecond))}
	callEnd := []trace.SpanEndOption{trace.WithTimestamp(t0.Add(2 * time.Microsecond))}
	attemptAttrs := []attribute.KeyValue{op, provider, upstream, model, attribute.Int("llmclient.attempt", 1),
		attribute.String("llmclient.key", "key#1"), status, attribute.Int("llmclient.estimated_tokens", 1034),
		attribute.Int("gen_ai.usage.input_tokens", 12), attribute.Int("gen_ai.usage.output_tokens", 3)}
	callAttrs := []attribute.KeyValue{attribute.Int("llmclient.attempts", 1), provider, upstream, respModel,
		attribute.StringSlice("gen_ai.response.finish_reasons", []string{"stop"}),
		attribute.Int("gen_ai.usage.input_tokens", 12), attribute.Int("gen_ai.usage.output_tokens", 3),
		attribute.Int64("llmclient.call_id", 7)}
	b.ReportAllocs()
	for b.Loop() {
		cctx, call := tracer.Start(ctx, "chat m", callStart...)
		attempts.Add(1)
		if call.IsRecording() {
			_, at := tracer.Start(cctx, "attempt a", attemptStart...)
			at.SetAttributes(attemptAttrs...)
			at.End(attemptEnd...)
		}
		dur.Record(cctx, 0.001, recCall...)
		perCall.Record(cctx, 1, recCall...)
		tokens.Record(cctx, 12, recIn...)
		tokens.Record(cctx, 3, recOut...)
		if call.IsRecording() {
			call.SetAttributes(callAttrs...)
			call.End(callEnd...)
		} else {
			call.End()
		}
	}
}
