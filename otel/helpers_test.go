package otel_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	llmotel "github.com/llmclient/llmclient/otel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rig is a Telemetry wired to an in-memory span exporter and a manual metric reader.
type rig struct {
	tel    *llmotel.Telemetry
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
}

func newRig(t *testing.T, opts ...llmotel.Option) *rig {
	t.Helper()
	r := &rig{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	tel, err := llmotel.New(append([]llmotel.Option{llmotel.WithTracerProvider(r.tp), llmotel.WithMeterProvider(mp)}, opts...)...)
	require.NoError(t, err)
	r.tel = tel
	return r
}

// client builds a Client observed and wrapped by the rig's Telemetry, and watched.
func (r *rig) client(t *testing.T, opts ...llmclient.Option) *llmclient.Client {
	t.Helper()
	c, err := llmclient.New(append([]llmclient.Option{llmclient.WithObserver(r.tel.Observe),
		llmclient.WithMiddleware(r.tel.Middleware)}, opts...)...)
	require.NoError(t, err)
	reg, err := r.tel.Watch(c)
	require.NoError(t, err)
	t.Cleanup(func() { _ = reg.Unregister() })
	return c
}

// root starts a caller's span, the parent the call span must have.
func (r *rig) root(ctx context.Context) (context.Context, trace.Span) {
	return r.tp.Tracer("test").Start(ctx, "caller")
}

// named returns the ended spans called name, in the order they ended.
func (r *rig) named(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range r.spans.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the only ended span called name.
func (r *rig) one(t *testing.T, name string) tracetest.SpanStub {
	t.Helper()
	s := r.named(name)
	require.Len(t, s, 1, "spans named %q among %v", name, r.names())
	return s[0]
}

func (r *rig) names() []string {
	var out []string
	for _, s := range r.spans.GetSpans() {
		out = append(out, s.Name)
	}
	return out
}

// childrenOf returns the ended spans whose parent is p, in the order they started.
func (r *rig) childrenOf(p tracetest.SpanStub) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range r.spans.GetSpans() {
		if s.Parent.SpanID() == p.SpanContext.SpanID() {
			out = append(out, s)
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].StartTime.Before(out[j-1].StartTime); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// attrs returns a span's or a point's attributes as a map.
func attrs(kvs []attribute.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

func setAttrs(s attribute.Set) map[string]any { return attrs(s.ToSlice()) }

// collect reads every metric now.
func (r *rig) collect(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// histF returns the float histogram points of a metric.
func histF(t *testing.T, ms map[string]metricdata.Metrics, name string) []metricdata.HistogramDataPoint[float64] {
	t.Helper()
	m, ok := ms[name]
	require.True(t, ok, "metric %s", name)
	h, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is a float histogram: %T", name, m.Data)
	return h.DataPoints
}

func histI(t *testing.T, ms map[string]metricdata.Metrics, name string) []metricdata.HistogramDataPoint[int64] {
	t.Helper()
	m, ok := ms[name]
	require.True(t, ok, "metric %s", name)
	h, ok := m.Data.(metricdata.Histogram[int64])
	require.True(t, ok, "%s is an int histogram: %T", name, m.Data)
	return h.DataPoints
}

func sumI(t *testing.T, ms map[string]metricdata.Metrics, name string) []metricdata.DataPoint[int64] {
	t.Helper()
	m, ok := ms[name]
	require.True(t, ok, "metric %s", name)
	s, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is an int sum: %T", name, m.Data)
	return s.DataPoints
}

func gaugeI(t *testing.T, ms map[string]metricdata.Metrics, name string) []metricdata.DataPoint[int64] {
	t.Helper()
	m, ok := ms[name]
	require.True(t, ok, "metric %s", name)
	g, ok := m.Data.(metricdata.Gauge[int64])
	require.True(t, ok, "%s is an int gauge: %T", name, m.Data)
	return g.DataPoints
}

func gaugeF(t *testing.T, ms map[string]metricdata.Metrics, name string) []metricdata.DataPoint[float64] {
	t.Helper()
	m, ok := ms[name]
	require.True(t, ok, "metric %s", name)
	g, ok := m.Data.(metricdata.Gauge[float64])
	require.True(t, ok, "%s is a float gauge: %T", name, m.Data)
	return g.DataPoints
}

// matching returns the points whose attributes include want.
func matching[P interface{ attrSet() attribute.Set }](points []P, want map[string]any) []P {
	var out []P
	for _, p := range points {
		got := setAttrs(p.attrSet())
		ok := true
		for k, v := range want {
			if got[k] != v {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, p)
		}
	}
	return out
}

// pointAttrs lets matching read the attributes of any data point.
type (
	hpF struct {
		metricdata.HistogramDataPoint[float64]
	}
	hpI struct {
		metricdata.HistogramDataPoint[int64]
	}
	dpI struct{ metricdata.DataPoint[int64] }
	dpF struct{ metricdata.DataPoint[float64] }
)

func (p hpF) attrSet() attribute.Set { return p.Attributes }
func (p hpI) attrSet() attribute.Set { return p.Attributes }
func (p dpI) attrSet() attribute.Set { return p.Attributes }
func (p dpF) attrSet() attribute.Set { return p.Attributes }

func wrapHF(ps []metricdata.HistogramDataPoint[float64]) []hpF {
	out := make([]hpF, len(ps))
	for i, p := range ps {
		out[i] = hpF{p}
	}
	return out
}

func wrapHI(ps []metricdata.HistogramDataPoint[int64]) []hpI {
	out := make([]hpI, len(ps))
	for i, p := range ps {
		out[i] = hpI{p}
	}
	return out
}

func wrapI(ps []metricdata.DataPoint[int64]) []dpI {
	out := make([]dpI, len(ps))
	for i, p := range ps {
		out[i] = dpI{p}
	}
	return out
}

func wrapF(ps []metricdata.DataPoint[float64]) []dpF {
	out := make([]dpF, len(ps))
	for i, p := range ps {
		out[i] = dpF{p}
	}
	return out
}

func chatReq(model string) *llmclient.Request {
	return &llmclient.Request{Model: model, Messages: []llmclient.Message{llmclient.UserMessage("Say hello.")}}
}

// keepCallID is an observer that keeps in id the CallID of the last call that ended.
func keepCallID(id *atomic.Uint64) llmclient.Option {
	return llmclient.WithObserver(func(_ context.Context, e llmclient.Event) {
		if e.Kind == event.Call {
			id.Store(e.CallID)
		}
	})
}
