package llmgateway

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient"
)

// upstreamClock accumulates the time a request spends inside its upstreams' adapters:
// waiting for response headers, for a one-shot body, and for each stream chunk. The
// gateway's overhead is the request's time minus this (and minus deliberate waits).
type upstreamClock struct{ ns atomic.Int64 }

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

// timed wraps a Provider to time its calls on the request's clock. It keeps the
// Provider's optional capabilities (Dialect, Embedder, UsageReader) visible to the
// Client by the variants below.
type timed struct{ p llmclient.Provider }

func (t *timed) Complete(ctx context.Context, call *llmclient.Call) (*llmclient.Response, error) {
	c, start := clockOf(ctx), time.Now()
	defer c.since(start)
	return t.p.Complete(ctx, call)
}

func (t *timed) Stream(ctx context.Context, call *llmclient.Call) (llmclient.ProviderStream, error) {
	c, start := clockOf(ctx), time.Now()
	s, err := t.p.Stream(ctx, call)
	c.since(start)
	if err != nil || c == nil {
		return s, err
	}
	return &timedStream{s: s, c: c}, nil
}

type timedStream struct {
	s llmclient.ProviderStream
	c *upstreamClock
}

func (t *timedStream) Recv() (llmclient.Chunk, error) {
	start := time.Now()
	defer t.c.since(start)
	return t.s.Recv()
}

func (t *timedStream) Close() error { return t.s.Close() }

type timedEmbed struct {
	*timed
	e llmclient.Embedder
}

func (t *timedEmbed) Embed(ctx context.Context, call *llmclient.EmbedCall) (*llmclient.EmbedResponse, error) {
	c, start := clockOf(ctx), time.Now()
	defer c.since(start)
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

// timeProvider wraps p so that its calls are timed, keeping its capabilities.
func timeProvider(p llmclient.Provider) llmclient.Provider {
	t := &timed{p: p}
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
