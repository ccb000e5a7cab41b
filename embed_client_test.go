package llmclient_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/breaker"
	"github.com/llmclient/llmclient/estimate"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/routing"
)

// chatOnly hides the fake's Embedder: an upstream that cannot embed.
type chatOnly struct{ llmclient.Provider }

// batchOf reports a MaxEmbedBatch of its own.
type batchOf struct {
	*fake.Provider
	n int
}

func (b batchOf) MaxEmbedBatch() int { return b.n }

// gauge counts the embedding calls in flight on a fake, each taking 10ms.
type gauge struct {
	*fake.Provider
	cur, peak atomic.Int32
}

func (g *gauge) Embed(ctx context.Context, call *llmclient.EmbedCall) (*llmclient.EmbedResponse, error) {
	n := g.cur.Add(1)
	defer g.cur.Add(-1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
	time.Sleep(10 * time.Millisecond)
	return g.Provider.Embed(ctx, call)
}

func texts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "text number " + strconv.Itoa(i)
	}
	return out
}

func embedReq(in ...string) *llmclient.EmbedRequest {
	return &llmclient.EmbedRequest{Model: "emb", Input: in}
}

// embedInputs lists the inputs of each embedding call a fake received.
func embedInputs(p *fake.Provider) [][]string {
	var out [][]string
	for _, r := range p.Requests() {
		if r.Embed != nil {
			out = append(out, r.Embed.Input)
		}
	}
	return out
}

func TestEmbedBatchesInOrder(t *testing.T) {
	p := fake.New(fake.Embedding(4).Forever())
	p.SetMaxEmbedBatch(3)
	c := newClient(t, up("a", p))
	in := texts(10)
	resp, err := c.Embed(context.Background(), embedReq(in...))
	require.NoError(t, err)
	require.Len(t, resp.Vectors, 10)
	for i, text := range in {
		assert.Equal(t, fake.Vector(text, 4), resp.Vectors[i], "vector %d is its input's, in order", i)
	}
	got := embedInputs(p)
	require.Len(t, got, 4)
	var sizes []int
	for _, b := range got {
		sizes = append(sizes, len(b))
	}
	// The batches run concurrently, so the fake receives them in any order.
	slices.Sort(sizes)
	assert.Equal(t, []int{1, 3, 3, 3}, sizes)
	require.Len(t, resp.Attempts, 4, "one attempt per batch")
	for i, at := range resp.Attempts {
		assert.Equal(t, i, at.Batch)
		assert.Equal(t, 1, at.Number)
		assert.Equal(t, "a", at.Upstream)
	}
	want := 0
	for _, text := range in {
		want += max(1, len(text)/4) // the fake's usage
	}
	assert.Equal(t, want, resp.Usage.InputTokens, "usage is summed over the batches")
	assert.Equal(t, want, resp.Usage.TotalTokens)
	assert.False(t, resp.Usage.Estimated)
	assert.Equal(t, "a", resp.Upstream)
	assert.Equal(t, "emb", resp.Model)
	assert.False(t, resp.Fallback)
}

func TestEmbedConcurrencyIsBounded(t *testing.T) {
	for _, tc := range []struct{ conc, want int }{{0, 4}, {2, 2}, {1, 1}, {math.MaxInt, 10}} {
		t.Run(strconv.Itoa(tc.conc), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := &gauge{Provider: fake.New(fake.Embedding(2).Forever())}
				g.SetMaxEmbedBatch(1)
				c := newClient(t, up("a", g))
				req := embedReq(texts(10)...)
				req.Concurrency = tc.conc
				resp, err := c.Embed(context.Background(), req)
				require.NoError(t, err)
				assert.Len(t, resp.Vectors, 10)
				assert.Equal(t, int32(tc.want), g.peak.Load(), "batches in flight at once")
			})
		})
	}
}

func TestEmbedBatchesByEstimatedTokens(t *testing.T) {
	big := strings.Repeat("tokens and more tokens ", 20_000)
	n := estimate.Heuristic{}.CountTokens("emb", big)
	require.True(t, n > 250_000/3 && n <= 250_000/2, "each input is %d estimated tokens: two fit a batch, three do not", n)
	p := fake.New(fake.Embedding(2).Forever())
	c := newClient(t, up("a", p))
	resp, err := c.Embed(context.Background(), embedReq(big, big, big, "small"))
	require.NoError(t, err)
	assert.Len(t, resp.Vectors, 4)
	var sizes []int
	for _, b := range embedInputs(p) {
		sizes = append(sizes, len(b))
	}
	assert.Equal(t, []int{2, 2}, sizes, "250,000 estimated tokens at most per batch")
	assert.Equal(t, 2*n, resp.Attempts[0].EstimatedTokens, "a batch is charged its inputs' estimate, no output")
}

func TestEmbedRefusesBadRequests(t *testing.T) {
	tests := []struct {
		name string
		req  *llmclient.EmbedRequest
		want string
	}{
		{"nil", nil, "nil embed request"},
		{"no input", embedReq(), "no input"},
		{"empty text", embedReq("a", ""), "input 1 is empty"},
		{"negative dimensions", &llmclient.EmbedRequest{Model: "emb", Input: []string{"a"}, Dimensions: -1}, "negative"},
		{"huge dimensions", &llmclient.EmbedRequest{Model: "emb", Input: []string{"a"}, Dimensions: 1<<16 + 1}, "above the largest"},
		{"MaxInt dimensions", &llmclient.EmbedRequest{Model: "emb", Input: []string{"a"}, Dimensions: math.MaxInt}, "above the largest"},
		{"negative concurrency", &llmclient.EmbedRequest{Model: "emb", Input: []string{"a"}, Concurrency: -1}, "Concurrency -1"},
	}
	p := fake.New(fake.Embedding(2).Forever())
	c := newClient(t, up("a", p))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Embed(context.Background(), tt.req)
			require.Error(t, err)
			assert.Equal(t, failure.BadRequest, llmclient.ClassOf(err))
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	assert.Empty(t, p.Requests(), "nothing is sent")

	resp, err := c.Embed(context.Background(), &llmclient.EmbedRequest{Model: "emb", Input: []string{"a"}, Dimensions: 1 << 16})
	require.NoError(t, err, "the largest Dimensions is allowed")
	assert.Len(t, resp.Vectors[0], 1<<16)
}

func TestEmbedBadMaxEmbedBatch(t *testing.T) {
	for _, n := range []int{0, -1, math.MinInt} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			bad := fake.New(fake.Embedding(2).Forever())
			c := newClient(t, up("bad", batchOf{bad, n}))
			_, err := c.Embed(context.Background(), embedReq("a"))
			require.Error(t, err)
			assert.Equal(t, failure.BadRequest, llmclient.ClassOf(err))
			assert.ErrorIs(t, err, llmclient.ErrUnsupported)
			assert.Contains(t, err.Error(), "MaxEmbedBatch")

			good := fake.New(fake.Embedding(2).Forever())
			c = newClient(t, up("bad", batchOf{bad, n}), up("good", batchOf{good, 2}))
			resp, err := c.Embed(context.Background(), embedReq("a", "b", "c"))
			require.NoError(t, err)
			assert.Len(t, resp.Vectors, 3)
			assert.Equal(t, [][]string{{"a", "b"}, {"c"}}, embedInputs(good), "batches sized by the usable Embedder")
			assert.Empty(t, bad.Requests(), "the broken Embedder is refused locally, never called")
			require.NotEmpty(t, resp.Attempts)
			assert.True(t, resp.Attempts[0].Local)
			assert.Equal(t, "bad", resp.Attempts[0].Upstream)
		})
	}
	huge := fake.New(fake.Embedding(2).Forever())
	c := newClient(t, up("huge", batchOf{huge, math.MaxInt}))
	_, err := c.Embed(context.Background(), embedReq(texts(100)...))
	require.NoError(t, err)
	assert.Len(t, embedInputs(huge), 1, "a MaxInt batch size sends one batch")
}

func TestEmbedSkipsUpstreamsThatDoNotEmbed(t *testing.T) {
	chat := fake.New(fake.Reply("hi").Forever())
	emb := fake.New(fake.Embedding(3).Forever())
	c := newClient(t, up("chat", chatOnly{chat}), up("emb", emb))
	resp, err := c.Embed(context.Background(), embedReq("a"))
	require.NoError(t, err)
	assert.Equal(t, "emb", resp.Upstream)
	assert.Equal(t, []string{"emb"}, upstreamsOf(resp.Attempts), "left out of the route, not refused")
	assert.False(t, resp.Fallback)

	c = newClient(t, up("chat", chatOnly{chat}))
	_, err = c.Embed(context.Background(), embedReq("a"))
	assert.ErrorIs(t, err, llmclient.ErrNoUpstream)
	assert.Equal(t, failure.NotFound, llmclient.ClassOf(err))
}

func TestEmbedRetriesAndFailsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Fail(429).RetryAfter(time.Second), fake.Fail(503).Forever())
		b := fake.New(fake.Embedding(4).Forever())
		c := newClient(t, up("a", a), up("b", b))
		var resp *llmclient.EmbedResponse
		var err error
		took := elapsed(func() { resp, err = c.Embed(context.Background(), embedReq("x")) })
		require.NoError(t, err)
		assert.Equal(t, "b", resp.Upstream)
		assert.True(t, resp.Fallback)
		assert.Equal(t, []string{"a", "a", "a", "b"}, upstreamsOf(resp.Attempts), "three attempts on a, then b")
		assert.Equal(t, failure.RateLimited, resp.Attempts[0].Class)
		assert.Equal(t, fake.ClassForStatus(503), resp.Attempts[1].Class)
		assert.GreaterOrEqual(t, took, time.Second, "the Retry-After was waited for")
	})
}

func TestEmbedPinsLaterBatchesToTheFirstAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Fail(503).Times(3), fake.Embedding(4).Forever())
		b := fake.New(fake.Embedding(4).Forever())
		a.SetMaxEmbedBatch(2)
		b.SetMaxEmbedBatch(2)
		c := newClient(t, up("a", a), up("b", b))
		resp, err := c.Embed(context.Background(), embedReq(texts(7)...))
		require.NoError(t, err)
		assert.Len(t, a.Requests(), 3, "a is not asked again once b answered the first batch")
		assert.Len(t, embedInputs(b), 4)
		for _, at := range resp.Attempts {
			if at.Batch > 0 {
				assert.Equal(t, "b", at.Upstream, "batch %d", at.Batch)
			}
		}
	})
}

func TestEmbedPinningOverridesTheRouteStrategy(t *testing.T) {
	a := fake.New(fake.Embedding(4).Forever())
	b := fake.New(fake.Embedding(4).Forever())
	a.SetMaxEmbedBatch(1)
	b.SetMaxEmbedBatch(1)
	c := newClient(t, up("a", a), up("b", b), llmclient.WithRouting("", routing.Weighted))
	resp, err := c.Embed(context.Background(), embedReq(texts(20)...))
	require.NoError(t, err)
	first := resp.Attempts[0].Upstream
	for _, at := range resp.Attempts {
		assert.Equal(t, first, at.Upstream, "every batch on the upstream that answered the first")
	}
}

func TestEmbedDimensionMismatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Embedding(4), fake.Fail(503).Forever())
		b := fake.New(fake.Embedding(8).Forever())
		a.SetMaxEmbedBatch(1)
		b.SetMaxEmbedBatch(1)
		c := newClient(t, up("a", a), up("b", b))
		_, err := c.Embed(context.Background(), embedReq("x", "y"))
		require.Error(t, err)
		assert.ErrorIs(t, err, llmclient.ErrDimensionMismatch)
		assert.Equal(t, failure.Unavailable, llmclient.ClassOf(err))
		var e *llmclient.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, []string{"a", "a", "a", "a", "b"}, upstreamsOf(e.Attempts), "batch 0 on a; batch 1: a three times, then b")
		last := e.Attempts[len(e.Attempts)-1]
		assert.Equal(t, 1, last.Batch)
		assert.False(t, last.Local, "b was called: its answer had another length")
		assert.Equal(t, breaker.Closed, c.Breaker("b").State(), "a dimension mismatch is not an outage")
	})
}

func TestEmbedDimensionsMustMatchTheRequest(t *testing.T) {
	a := fake.New(fake.Embedding(2).Vectors([]float32{1, 0, 0}).Forever()) // ignores Dimensions
	b := fake.New(fake.Embedding(8).Forever())                             // honours it
	c := newClient(t, up("a", a), up("b", b))
	resp, err := c.Embed(context.Background(), &llmclient.EmbedRequest{Model: "emb", Input: []string{"x"}, Dimensions: 5})
	require.NoError(t, err)
	assert.Equal(t, "b", resp.Upstream)
	assert.Len(t, resp.Vectors[0], 5)
	assert.ErrorIs(t, resp.Attempts[0].Err, llmclient.ErrDimensionMismatch)
}

func TestEmbedMalformedAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := fake.New(fake.Embedding(2).Vectors([]float32{1, 0}, []float32{1}).Forever()) // wrong count, mixed lengths
		c := newClient(t, up("a", a), llmclient.WithMaxAttempts(1))
		_, err := c.Embed(context.Background(), embedReq("x"))
		assert.Equal(t, failure.ServerError, llmclient.ClassOf(err))
		assert.Contains(t, err.Error(), "2 vectors for 1 inputs")
		_, err = c.Embed(context.Background(), embedReq("x", "y"))
		assert.Equal(t, failure.ServerError, llmclient.ClassOf(err))
		assert.Contains(t, err.Error(), "mixes vector lengths")
	})
}

func TestEmbedFailedBatchStopsTheCall(t *testing.T) {
	p := fake.New(fake.Embedding(2), fake.Fail(400).Message("input too long"), fake.Embedding(2).Forever())
	p.SetMaxEmbedBatch(1)
	c := newClient(t, up("a", p))
	req := embedReq(texts(6)...)
	req.Concurrency = 1
	_, err := c.Embed(context.Background(), req)
	require.Error(t, err)
	assert.Equal(t, failure.BadRequest, llmclient.ClassOf(err))
	assert.Contains(t, err.Error(), "input too long")
	assert.Len(t, p.Requests(), 2, "no batch is sent after the failed one")
	var e *llmclient.Error
	require.ErrorAs(t, err, &e)
	require.Len(t, e.Attempts, 2, "the error carries every batch's trace")
	assert.Equal(t, []int{0, 1}, []int{e.Attempts[0].Batch, e.Attempts[1].Batch})
}

func TestEmbedCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Embedding(2).Latency(time.Second).Forever())
		p.SetMaxEmbedBatch(1)
		c := newClient(t, up("a", p))
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		req := embedReq(texts(8)...)
		req.Concurrency = 2
		_, err := c.Embed(ctx, req)
		require.Error(t, err)
		assert.Contains(t, []failure.Class{failure.Timeout, failure.Canceled}, llmclient.ClassOf(err))
		assert.Len(t, p.Requests(), 4, "two waves of two: the second one canceled, nothing after it")
		assert.Equal(t, 0, c.InFlight("a"), "nothing stays in flight")
	})
}

func TestEmbedEstimatesMissingUsage(t *testing.T) {
	p := fake.New(fake.Embedding(2).Usage(0).Forever())
	c := newClient(t, up("a", p))
	resp, err := c.Embed(context.Background(), embedReq("an input of some words", "and another"))
	require.NoError(t, err)
	est := estimate.Heuristic{}
	want := est.CountTokens("emb", "an input of some words") + est.CountTokens("emb", "and another")
	assert.Equal(t, want, resp.Usage.InputTokens)
	assert.True(t, resp.Usage.Estimated)
	assert.Zero(t, resp.Usage.OutputTokens)
}

func TestEmbedEventsAndCallOptions(t *testing.T) {
	var log eventLog
	a := fake.New(fake.Fail(503).Forever())
	b := fake.New(fake.Embedding(2).Forever())
	a.SetMaxEmbedBatch(1)
	c := newClient(t, up("a", a), up("b", b), llmclient.WithObserver(log.observe),
		llmclient.WithBackoff(time.Millisecond, time.Millisecond))
	ctx := llmclient.WithCallOptions(context.Background(), llmclient.CallOptions{MaxAttempts: 1,
		Headers: http.Header{"X-Trace": {"t1"}}})
	resp, err := c.Embed(ctx, embedReq("x", "y"))
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "b"}, upstreamsOf(resp.Attempts), "MaxAttempts 1: batch 0 fails over at once, batch 1 is pinned to b")
	calls := log.kinds(event.Call)
	require.Len(t, calls, 2, "one call event per batch")
	assert.NotEqual(t, calls[0].CallID, calls[1].CallID)
	for _, e := range log.kinds(event.Attempt) {
		assert.True(t, e.Embed, "attempt events are marked Embed")
	}
	for _, e := range calls {
		assert.True(t, e.Embed)
		assert.Equal(t, "b", e.Upstream)
	}
	assert.Len(t, log.kinds(event.Failover), 1)

	ctx = llmclient.WithCallOptions(context.Background(), llmclient.CallOptions{NoFailover: true})
	_, err = c.Embed(ctx, embedReq("x"))
	assert.Equal(t, fake.ClassForStatus(503), llmclient.ClassOf(err), "NoFailover keeps the batch on a")
}

func TestEmbedLimiterChargesTheInputs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Embedding(2).Usage(50).Forever())
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "a", Provider: p,
			Limits: llmclient.Limits{TPM: 6000, TokenBurst: 1000}}))
		text := strings.Repeat("word ", 800) // about 800 estimated tokens
		cost := estimate.Heuristic{}.CountTokens("emb", text)
		require.True(t, cost > 500 && cost < 1000, "cost %d", cost)
		for range 3 {
			_, err := c.Embed(context.Background(), embedReq(text))
			require.NoError(t, err)
		}
		resp, err := c.Embed(context.Background(), embedReq(text))
		require.NoError(t, err)
		assert.Equal(t, cost, resp.Attempts[0].EstimatedTokens)
		snap := c.Snapshot()
		tok := snap.Upstreams[0].Keys[0].Tokens
		require.NotNil(t, tok)
		assert.Less(t, tok.Remaining, 1000.0, "the reported usage (50 a call) was reconciled against the bucket")
	})
}

func TestEmbedNoErrorLeaksTheKey(t *testing.T) {
	const secret = "sk-embed-SECRET-1234"
	p := fake.New(fake.Fail(401).Message("invalid key " + secret).Forever())
	c := newClient(t, up("a", p, secret))
	_, err := c.Embed(context.Background(), embedReq("x"))
	require.Error(t, err)
	assert.NotContains(t, err.Error(), secret)
	var e *llmclient.Error
	require.True(t, errors.As(err, &e))
	for _, at := range e.Attempts {
		assert.NotContains(t, at.Err.Error(), secret)
	}
}
