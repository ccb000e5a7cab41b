// Command observability shows what llmclient's OpenTelemetry module exports, as
// Prometheus scrapes it. It needs no network and no key: it starts two simulated
// OpenAI-compatible upstreams on loopback (a primary with a small token quota that now
// and then answers 429 and 500, and a backup), sends a burst of calls through a Client instrumented with
// github.com/llmclient/llmclient/otel (typed calls, streams, and plain net/http calls
// through the Client's transport), and prints the metrics in the Prometheus text format
// and the Client's health snapshot.
//
//	go run .                         # a burst of calls, then the metrics and the snapshot
//	go run . -listen 127.0.0.1:9464  # keep sending calls; serve /metrics and /healthz
//
// README.md beside this file has the alarms to put on these metrics, in PromQL.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/cache"
	llmotel "github.com/llmclient/llmclient/otel"
	"github.com/llmclient/llmclient/provider/openai"
)

func main() {
	listen := flag.String("listen", "", "serve /metrics and /healthz on this address (keep it on loopback, e.g. 127.0.0.1:9464) and send calls until interrupted")
	calls := flag.Int("calls", 300, "calls in the burst")
	flag.Parse()

	d, err := newDemo()
	if err != nil {
		log.Fatal(err)
	}
	defer d.close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	if *listen == "" {
		d.traffic(ctx, *calls)
		fmt.Println("# The metrics, as Prometheus scrapes them (llmclient_* and gen_ai_* only; histogram buckets left out):")
		fmt.Print(filterMetrics(d.scrape()))
		fmt.Println("\n# The Client's health snapshot (Client.Snapshot), as /healthz serves it:")
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(d.client.Snapshot()); err != nil {
			log.Fatal(err)
		}
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", d.metrics)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(d.client.Snapshot())
	})
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		for ctx.Err() == nil {
			d.traffic(ctx, 50)
			sleep(ctx, time.Second)
		}
	}()
	log.Printf("serving http://%s/metrics and /healthz; Ctrl-C to stop", *listen)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}

// demo is the simulated upstreams and the instrumented Client.
type demo struct {
	primary, backup *sim
	client          *llmclient.Client
	transport       *http.Client
	metrics         http.Handler
	provider        *sdkmetric.MeterProvider
	watch           metric.Registration
}

func newDemo() (*demo, error) {
	d := &demo{primary: newSim("primary", 11, 3), backup: newSim("backup", 0, 0)}
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry))
	if err != nil {
		return nil, err
	}
	d.provider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	d.metrics = promhttp.HandlerFor(registry, promhttp.HandlerOpts{})
	tel, err := llmotel.New(llmotel.WithMeterProvider(d.provider)) // spans: the global tracer provider
	if err != nil {
		return nil, err
	}
	primary, err := openai.New(openai.WithBaseURL(d.primary.URL + "/v1"))
	if err != nil {
		return nil, err
	}
	backup, err := openai.New(openai.WithBaseURL(d.backup.URL + "/v1"))
	if err != nil {
		return nil, err
	}
	// An exact response cache in front of the layers: it reports its lookups to the same
	// observer (llmclient_cache_lookups_total) and its size to the snapshot
	// (llmclient_cache_bytes, llmclient_cache_entries, llmclient_cache_evictions_total).
	store, err := cache.NewMemory(cache.MemoryConfig{MaxEntries: 100})
	if err != nil {
		return nil, err
	}
	responses, err := cache.New(store, cache.WithObserver(cache.ClientEvents(tel.Observe)))
	if err != nil {
		return nil, err
	}
	d.client, err = llmclient.New(
		llmclient.WithObserver(tel.Observe),
		llmclient.WithMiddleware(tel.Middleware),
		llmclient.WithMiddleware(responses.Middleware()),
		llmclient.WithCacheStats("responses", responses.Health),
		// The primary's keys have a small token quota: once their buckets are spent, the
		// limiter refuses at once (WithMaxWait) and the calls fail over to the backup. Its
		// third key has been revoked: the first 401 evicts it and raises an alert.
		llmclient.WithUpstream(llmclient.Upstream{Name: "primary", Provider: primary,
			Keys:   []string{"sk-demo-1", "sk-demo-2", revokedKey},
			Limits: llmclient.Limits{RPM: 3000, TPM: 50_000, MaxConcurrent: 8}}),
		llmclient.WithUpstream(llmclient.Upstream{Name: "backup", Provider: backup, Keys: []string{"sk-demo-backup"}}),
		llmclient.WithModelGroup("chat", "primary", "backup"),
		llmclient.WithModelGroup("gpt-4o-mini", "primary", "backup"),
		llmclient.WithMaxAttempts(2),
		llmclient.WithBackoff(5*time.Millisecond, 20*time.Millisecond),
		llmclient.WithKeyCooldown(20*time.Millisecond),
		llmclient.WithMaxWait(10*time.Millisecond),
	)
	if err != nil {
		return nil, err
	}
	if d.watch, err = tel.Watch(d.client); err != nil {
		return nil, err
	}
	d.transport = &http.Client{Transport: tel.Transport(d.client.Transport(nil))}
	return d, nil
}

func (d *demo) close() {
	_ = d.watch.Unregister()
	_ = d.provider.Shutdown(context.Background())
	d.transport.CloseIdleConnections()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	d.primary.Close()
	d.backup.Close()
}

// traffic sends n calls from eight goroutines: most through Complete, every fourth as a
// stream, every tenth as a plain HTTP request through the Client's transport.
func (d *demo) traffic(ctx context.Context, n int) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				d.call(ctx, i)
			}
		})
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
}

func (d *demo) call(ctx context.Context, i int) {
	// Most prompts are new; every fifth is one of three frequent questions, which the
	// cache answers once it has them.
	prompt := "Say hello to caller " + strconv.Itoa(i) + "."
	if i%5 == 0 {
		prompt = faq[i/5%len(faq)]
	}
	req := &llmclient.Request{Model: "chat", MaxTokens: 64,
		Messages: []llmclient.Message{llmclient.UserMessage(prompt)}}
	switch {
	case i%10 == 9:
		body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello."}]}`
		hr, err := http.NewRequestWithContext(ctx, http.MethodPost, d.primary.URL+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			return
		}
		hr.Header.Set("Content-Type", "application/json")
		if resp, err := d.transport.Do(hr); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	case i%4 == 3:
		s, err := d.client.Stream(ctx, req)
		if err != nil {
			return
		}
		for s.Next() {
		}
		_ = s.Close()
	default:
		_, _ = d.client.Complete(ctx, req)
	}
}

// faq are the questions callers ask again and again.
var faq = [...]string{"What are your opening hours?", "How do I reset my password?", "Where is my order?"}

// scrape returns what Prometheus would read from /metrics.
func (d *demo) scrape() string {
	rec := httptest.NewRecorder()
	d.metrics.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}

// filterMetrics keeps the llmclient and GenAI series of a scrape and their help lines,
// without histogram buckets.
func filterMetrics(text string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		name := strings.TrimPrefix(strings.TrimPrefix(line, "# HELP "), "# TYPE ")
		if (strings.HasPrefix(name, "llmclient_") || strings.HasPrefix(name, "gen_ai_")) && !strings.Contains(line, "_bucket{") {
			b.WriteString(line)
		}
	}
	return b.String()
}
