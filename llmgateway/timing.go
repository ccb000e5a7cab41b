package llmgateway

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/pricing"
)

// upstreamClock accumulates the time a request's upstream HTTP exchanges take on the
// wire: sending the request and waiting for the response headers, then each read of
// the body (a one-shot answer, each stream chunk). The adapters' encoding and decoding
// is not in it. The gateway's overhead is the request's time minus this (and minus
// deliberate waits).
type upstreamClock struct {
	ns atomic.Int64
	// waitedNS and attempts sum the Client's event.Attempt events so far: the time
	// attempts spent waiting before their calls, and how many ended.
	waitedNS atomic.Int64
	attempts atomic.Int32
	// served is the upstream whose stream delivered the first content chunk, with its
	// adapter's notes on the call.
	served atomic.Pointer[servedBy]
	// end is what the Client's event.Call said of the call's end.
	end atomic.Pointer[callEnd]
}

// servedBy is the upstream whose stream gave a request's first content chunk, and the
// notes its adapter made translating the call (llmclient.Call.Notes).
type servedBy struct {
	name  string
	notes []string
}

// callEnd is a call's end as its event.Call reports it: the tokens (reported, or the
// Client's estimate), the cost and the number of attempts.
type callEnd struct {
	input, output int
	cost          pricing.Cost
	attempts      int
}

// call records the call's end.
func (c *upstreamClock) call(e llmclient.Event) {
	if c != nil {
		c.end.Store(&callEnd{input: e.InputTokens, output: e.OutputTokens, cost: e.Cost, attempts: e.Attempt})
	}
}

// ended returns the call's end, nil before the Client reported it.
func (c *upstreamClock) ended() *callEnd {
	if c == nil {
		return nil
	}
	return c.end.Load()
}

// attempt records an ended attempt's wait.
func (c *upstreamClock) attempt(waited time.Duration) {
	if c != nil {
		c.waitedNS.Add(int64(waited))
		c.attempts.Add(1)
	}
}

func (c *upstreamClock) waited() time.Duration {
	if c == nil {
		return 0
	}
	return time.Duration(c.waitedNS.Load())
}

type clockKey struct{}

func withClock(ctx context.Context, c *upstreamClock) context.Context {
	return context.WithValue(ctx, clockKey{}, c)
}

func clockOf(ctx context.Context) *upstreamClock {
	c, _ := ctx.Value(clockKey{}).(*upstreamClock)
	return c
}

func (c *upstreamClock) since(t time.Time) {
	if c != nil {
		c.ns.Add(int64(time.Since(t)))
	}
}

func (c *upstreamClock) total() time.Duration {
	if c == nil {
		return 0
	}
	return time.Duration(c.ns.Load())
}

// timed wraps a Provider to note, on the request's clock, which upstream's stream gave
// the first content chunk (the Client says so only when the stream ends). It keeps the
// Provider's optional capabilities (Dialect, Embedder, UsageReader) visible to the
// Client by the variants below.
type timed struct {
	name string
	p    llmclient.Provider
	// by is the servedBy of a call without notes, shared by its streams.
	by *servedBy
}

func (t *timed) Complete(ctx context.Context, call *llmclient.Call) (*llmclient.Response, error) {
	return t.p.Complete(ctx, call)
}

func (t *timed) Stream(ctx context.Context, call *llmclient.Call) (llmclient.ProviderStream, error) {
	c := clockOf(ctx)
	s, err := t.p.Stream(ctx, call)
	if err != nil || c == nil {
		return s, err
	}
	// The adapter made its notes building the vendor request, before the stream opened.
	by := t.by
	if len(call.Notes) > 0 {
		by = &servedBy{name: t.name, notes: call.Notes}
	}
	return &timedStream{s: s, c: c, by: by}, nil
}

type timedStream struct {
	s    llmclient.ProviderStream
	c    *upstreamClock
	by   *servedBy
	seen bool
}

func (t *timedStream) Recv() (llmclient.Chunk, error) {
	ch, err := t.s.Recv()
	if !t.seen && err == nil && ch.HasContent() {
		t.seen = true
		t.c.served.CompareAndSwap(nil, t.by)
	}
	return ch, err
}

func (t *timedStream) Close() error { return t.s.Close() }

type timedEmbed struct {
	*timed
	e llmclient.Embedder
}

func (t *timedEmbed) Embed(ctx context.Context, call *llmclient.EmbedCall) (*llmclient.EmbedResponse, error) {
	return t.e.Embed(ctx, call)
}

func (t *timedEmbed) MaxEmbedBatch() int { return t.e.MaxEmbedBatch() }

type timedDialect struct {
	*timed
	llmclient.Dialect
}

type timedDialectEmbed struct {
	*timedEmbed
	llmclient.Dialect
}

type timedDialectUsage struct {
	*timedDialect
	llmclient.UsageReader
}

type timedDialectEmbedUsage struct {
	*timedDialectEmbed
	llmclient.UsageReader
}

// timeProvider wraps p, the upstream called name, keeping its capabilities.
func timeProvider(name string, p llmclient.Provider) llmclient.Provider {
	t := &timed{name: name, p: p, by: &servedBy{name: name}}
	d, isD := p.(llmclient.Dialect)
	e, isE := p.(llmclient.Embedder)
	u, isU := p.(llmclient.UsageReader)
	switch {
	case isD && isE && isU:
		return &timedDialectEmbedUsage{&timedDialectEmbed{&timedEmbed{t, e}, d}, u}
	case isD && isE:
		return &timedDialectEmbed{&timedEmbed{t, e}, d}
	case isD && isU:
		return &timedDialectUsage{&timedDialect{t, d}, u}
	case isD:
		return &timedDialect{t, d}
	case isE:
		return &timedEmbed{t, e}
	}
	return t
}

// timingTransport times the upstream HTTP exchanges of the requests whose context
// carries a clock.
type timingTransport struct{ base http.RoundTripper }

func (t *timingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := clockOf(req.Context())
	if c == nil {
		return t.base.RoundTrip(req)
	}
	start := time.Now()
	resp, err := t.base.RoundTrip(req)
	c.since(start)
	if resp != nil && resp.Body != nil {
		resp.Body = &timedBody{rc: resp.Body, c: c}
	}
	return resp, err
}

type timedBody struct {
	rc io.ReadCloser
	c  *upstreamClock
}

func (b *timedBody) Read(p []byte) (int, error) {
	start := time.Now()
	n, err := b.rc.Read(p)
	b.c.since(start)
	return n, err
}

func (b *timedBody) Close() error { return b.rc.Close() }
