package otel_test

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/budget"
	"github.com/llmclient/llmclient/cache"
	"github.com/llmclient/llmclient/pricing"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/provider/openai"
	"github.com/llmclient/llmclient/routing"
)

// openSpans is a span processor that tracks the spans started and not ended.
type openSpans struct {
	mu   sync.Mutex
	open map[trace.SpanID]string
}

func (o *openSpans) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.open[s.SpanContext().SpanID()] = s.Name()
}

func (o *openSpans) OnEnd(s sdktrace.ReadOnlySpan) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.open, s.SpanContext().SpanID())
}

func (o *openSpans) Shutdown(context.Context) error   { return nil }
func (o *openSpans) ForceFlush(context.Context) error { return nil }

func (o *openSpans) names() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, n := range o.open {
		out = append(out, n)
	}
	return out
}

func trackOpen(r *rig) *openSpans {
	o := &openSpans{open: map[trace.SpanID]string{}}
	r.tp.RegisterSpanProcessor(o)
	return o
}

func drain(s *llmclient.Stream) {
	for s.Next() {
	}
	s.Close()
}

// Whatever way a call goes (hedged, continued and closed midway, answered by the
// fallback or the cache, refused by a breaker or a budget, canceled, timed out and never
// closed), every span it started ends, every attempt span is the child of a call span,
// and none ends before it starts.
func TestEverySpanEnds(t *testing.T) {
	cases := map[string]func(t *testing.T, r *rig){
		"hedged stream": func(t *testing.T, r *rig) {
			a := fake.New(fake.Stream("late").Latency(time.Hour))
			b := fake.New(fake.Stream("ok", "x"))
			c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: a}),
				llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: b}),
				llmclient.WithHedging("", routing.Hedge{On: true, Delay: time.Second}))
			s, err := c.Stream(context.Background(), chatReq("m"))
			require.NoError(t, err)
			drain(s)
		},
		"continuation closed midway": func(t *testing.T, r *rig) {
			a := fake.New(fake.Stream("one ", "two ", "three").CutAfter(1))
			b := fake.New(fake.Stream("one ", "two ", "three").ChunkDelay(time.Second))
			c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: a}),
				llmclient.WithUpstream(llmclient.Upstream{Name: "b", Provider: b}))
			s, err := c.Stream(context.Background(), chatReq("m"))
			require.NoError(t, err)
			require.True(t, s.Next())
			require.True(t, s.Next())
			s.Close()
		},
		"fallback function": func(t *testing.T, r *rig) {
			c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Fail(500).Forever())}),
				llmclient.WithMaxAttempts(1),
				llmclient.WithFallback(func(ctx context.Context, req *llmclient.Request, err error) (*llmclient.Response, error) {
					return &llmclient.Response{Text: "sorry"}, nil
				}))
			_, err := c.Complete(context.Background(), chatReq("m"))
			require.NoError(t, err)
			s, err := c.Stream(context.Background(), chatReq("m"))
			require.NoError(t, err)
			drain(s)
		},
		"cache hits": func(t *testing.T, r *rig) {
			store, err := cache.NewMemory(cache.MemoryConfig{MaxEntries: 10})
			require.NoError(t, err)
			ch, err := cache.New(store, cache.WithObserver(cache.ClientEvents(r.tel.Observe)))
			require.NoError(t, err)
			c := r.client(t, llmclient.WithMiddleware(ch.Middleware()),
				llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Stream("hi", "there").Forever())}))
			for range 2 {
				_, err := c.Complete(context.Background(), chatReq("m"))
				require.NoError(t, err)
			}
			for range 2 {
				s, err := c.Stream(context.Background(), chatReq("m"))
				require.NoError(t, err)
				drain(s)
			}
		},
		"breaker refusal": func(t *testing.T, r *rig) {
			c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Fail(500).Forever())}),
				llmclient.WithMaxAttempts(1), llmclient.WithBreaker(breaker.Config{ConsecutiveFailures: 1}))
			for range 2 {
				_, _ = c.Complete(context.Background(), chatReq("m"))
				_, _ = c.Stream(context.Background(), chatReq("m"))
			}
		},
		"budget refusal": func(t *testing.T, r *rig) {
			m, err := pricing.NewModel(pricing.Spec{ID: "m", Price: pricing.Price{Input: pricing.PerMTok(pricing.Dollar)}})
			require.NoError(t, err)
			p := fake.New(fake.Stream("ok").Usage(600_000, 0).Forever())
			c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p, Prices: map[string]*pricing.Model{"": m}}),
				llmclient.WithBudget(budget.Budget{Name: "daily", Cap: pricing.Dollar / 2}))
			req := chatReq("m")
			req.MaxTokens = 1
			for range 3 {
				_, _ = c.Complete(context.Background(), req)
				if s, err := c.Stream(context.Background(), req); err == nil {
					drain(s)
				}
			}
		},
		"caller cancel mid-stream, never closed": func(t *testing.T, r *rig) {
			c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Stream("a", "b", "c").ChunkDelay(time.Second).Forever())}))
			ctx, cancel := context.WithCancel(context.Background())
			s, err := c.Stream(ctx, chatReq("m"))
			require.NoError(t, err)
			require.True(t, s.Next())
			cancel()
			for s.Next() {
			}
		},
		"idle timeout, never closed": func(t *testing.T, r *rig) {
			c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: fake.New(fake.Stream("a", "b").StallAfter(1, time.Hour).Forever())}),
				llmclient.WithStreamContinuation(false), llmclient.WithIdleTimeout(time.Second))
			s, err := c.Stream(context.Background(), chatReq("m"))
			require.NoError(t, err)
			require.True(t, s.Next())
			time.Sleep(2 * time.Second)
		},
	}
	for name, run := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t)
				o := trackOpen(r)
				run(t, r)
				synctest.Wait()
				for range 5 {
					runtime.GC()
					time.Sleep(time.Millisecond)
					synctest.Wait()
				}
				require.Empty(t, o.names(), "open spans; ended: %v", r.names())
				calls := map[trace.SpanID]bool{}
				for _, s := range r.spans.GetSpans() {
					if s.SpanKind == trace.SpanKindClient {
						calls[s.SpanContext.SpanID()] = true
					}
				}
				for _, s := range r.spans.GetSpans() {
					if s.SpanKind == trace.SpanKindInternal {
						require.True(t, calls[s.Parent.SpanID()], "%s is the child of a call span", s.Name)
					}
					require.False(t, s.EndTime.Before(s.StartTime), "%s ends before it starts", s.Name)
				}
			})
		})
	}
}

// Transport mode: a streamed body ends its call span when read to its end, when closed
// after its first bytes, and, never read nor closed, once the collector finds it; the
// span has both attempts (the first failed with a 500) under it.
func TestTransportBodiesEndTheirSpans(t *testing.T) {
	for _, mode := range []string{"dropped", "closed", "read"} {
		t.Run(mode, func(t *testing.T) {
			r := newRig(t)
			srv := openAIServer(t)
			p, err := openai.New(openai.WithBaseURL(srv.URL + "/v1"))
			require.NoError(t, err)
			c := r.client(t, llmclient.WithUpstream(llmclient.Upstream{Name: "oai", Provider: p, Keys: []string{"sk-upstream"}}),
				llmclient.WithBackoff(time.Millisecond, 2*time.Millisecond))
			rt := r.tel.Transport(c.Transport(srv.Client().Transport))
			defer rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
			hc := &http.Client{Transport: rt}
			func() {
				req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions",
					strings.NewReader(`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
				require.NoError(t, err)
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				require.NoError(t, err)
				switch mode {
				case "closed":
					_, _ = resp.Body.Read(make([]byte, 10))
					resp.Body.Close()
				case "read":
					_, _ = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
			}()
			calls := collected(r, "chat gpt-4o-mini", 1)
			require.Len(t, calls, 1, "spans: %v", r.names())
			require.Len(t, r.childrenOf(calls[0]), 2, "attempts")
			ms := r.collect(t)
			for _, name := range []string{"gen_ai.client.operation.duration", "gen_ai.client.operation.time_to_first_chunk"} {
				if _, ok := ms[name]; !ok {
					continue
				}
				for _, p := range histF(t, ms, name) {
					require.GreaterOrEqual(t, p.Sum, 0.0, name)
				}
			}
		})
	}
}
