package llmgateway

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/llmclient/llmclient"
	llmotel "github.com/llmclient/llmclient/otel"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// metrics exports the otel module's GenAI and llmclient metrics, and the gateway's
// own, in the Prometheus format.
type metrics struct {
	tel      *llmotel.Telemetry
	mp       *sdkmetric.MeterProvider
	handler  http.Handler
	watched  metric.Registration
	requests metric.Int64Counter
	overhead metric.Float64Histogram
	duration metric.Float64Histogram
	// undeliveredN counts the one-shot answers whose writing failed, by route.
	undeliveredN    metric.Int64Counter
	undeliveredSets [3]metric.MeasurementOption // by route

	requestSets  sync.Map // requestKey → metric.MeasurementOption
	overheadSets sync.Map // overheadKey → metric.MeasurementOption
}

// providerNames maps a vendor to its gen_ai.provider.name.
var providerNames = map[string]string{"openai": "openai", "azure": "azure.ai.openai", "anthropic": "anthropic", "gemini": "gcp.gemini"}

func newMetrics(vendors map[string]string) (*metrics, []llmclient.Option, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, nil, err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	tel, err := llmotel.New(llmotel.WithMeterProvider(mp), llmotel.WithProviderName(func(upstream string) string {
		return providerNames[vendors[upstream]]
	}))
	if err != nil {
		_ = mp.Shutdown(context.Background())
		return nil, nil, err
	}
	m := &metrics{tel: tel, mp: mp, handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	meter := mp.Meter("github.com/llmclient/llmclient/llmgateway")
	if m.requests, err = meter.Int64Counter("llmgateway.requests", metric.WithDescription("Requests the gateway answered, by route, tenant and status."), metric.WithUnit("{request}")); err != nil {
		return nil, nil, err
	}
	if m.overhead, err = meter.Float64Histogram("llmgateway.overhead", metric.WithDescription("Time spent in the gateway and the engine, upstream calls and deliberate waits excluded."), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5)); err != nil {
		return nil, nil, err
	}
	if m.duration, err = meter.Float64Histogram("llmgateway.request.duration", metric.WithDescription("Requests' whole duration."), metric.WithUnit("s")); err != nil {
		return nil, nil, err
	}
	if m.undeliveredN, err = meter.Int64Counter("llmgateway.answers.undelivered", metric.WithDescription("One-shot answers whose writing to the caller failed after their request was logged and counted, by route."), metric.WithUnit("{answer}")); err != nil {
		return nil, nil, err
	}
	for r := range m.undeliveredSets {
		m.undeliveredSets[r] = metric.WithAttributeSet(attribute.NewSet(attribute.String("route", route(r).String())))
	}
	return m, []llmclient.Option{llmclient.WithMiddleware(tel.Middleware)}, nil
}

func (m *metrics) undelivered(r route) {
	m.undeliveredN.Add(context.Background(), 1, m.undeliveredSets[r])
}

func (m *metrics) watch(c *llmclient.Client) error {
	reg, err := m.tel.Watch(c)
	m.watched = reg
	return err
}

// requestKey and overheadKey name the attribute sets of the gateway's own
// instruments; the sets are built once each (their number is bounded by the routes,
// the configured tenants and the status codes), not per request.
type requestKey struct {
	route  route
	tenant string
	status int
}

type overheadKey struct {
	route  route
	stream bool
}

func (m *metrics) request(rec *record, d time.Duration) {
	ctx := context.Background()
	rk := requestKey{rec.route, rec.tenant, rec.status}
	set, ok := m.requestSets.Load(rk)
	if !ok {
		set, _ = m.requestSets.LoadOrStore(rk, metric.WithAttributeSet(attribute.NewSet(attribute.String("route", rec.route.String()),
			attribute.String("tenant", rec.tenant), attribute.String("status", strconv.Itoa(rec.status)))))
	}
	ok2 := overheadKey{rec.route, rec.stream}
	oset, ok := m.overheadSets.Load(ok2)
	if !ok {
		oset, _ = m.overheadSets.LoadOrStore(ok2, metric.WithAttributeSet(attribute.NewSet(attribute.String("route", rec.route.String()),
			attribute.Bool("stream", rec.stream))))
	}
	m.requests.Add(ctx, 1, set.(metric.MeasurementOption))
	m.overhead.Record(ctx, rec.overhead.Seconds(), oset.(metric.MeasurementOption))
	m.duration.Record(ctx, d.Seconds(), set.(metric.MeasurementOption))
}

func (m *metrics) close() error {
	if m.watched != nil {
		_ = m.watched.Unregister()
	}
	return m.mp.Shutdown(context.Background())
}
