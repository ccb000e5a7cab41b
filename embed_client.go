package llmclient

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/llmclient/llmclient/estimate"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/routing"
)

// ErrDimensionMismatch: an upstream answered an embedding batch with vectors of another
// length than the call's: the request's Dimensions, or the length of the batch that
// answered first. The attempt fails with failure.Unavailable and the batch moves on to the
// next upstream of its route.
var ErrDimensionMismatch = errors.New("llmclient: embedding vectors of another length than the call's")

// The bounds of Client.Embed.
const (
	// defaultEmbedConcurrency is the batches in flight at once when the request sets no
	// Concurrency.
	defaultEmbedConcurrency = 4
	// maxEmbedDimensions is the largest Dimensions a request may ask for: 16 times the
	// longest vectors the vendors offer (3,072), so that no request can make an upstream
	// answer unboundedly.
	maxEmbedDimensions = 1 << 16
	// embedBatchTokens bounds the estimated tokens of one batch: OpenAI refuses requests
	// whose inputs sum to more than 300,000 tokens (CreateEmbeddingRequest.input); a sixth
	// is left for the estimate's error. A single input larger than this is a batch of its
	// own, and the vendor judges it.
	embedBatchTokens = 250_000
)

// Embed returns one embedding vector per text of req.Input, in order, through the same
// layers as Complete: caller partition, limiter (the inputs' estimated tokens, no output
// reserved), retry with the retry budget, breaker, keys, failover, attempt timeout,
// hedging, CallOptions and events. It is not wrapped by Middleware.
//
// Only upstreams whose Provider implements Embedder serve it: the route of req.Model (its
// model group, or every upstream serving the model) is taken without the others; when
// none is left the call fails with failure.NotFound and ErrNoUpstream. An Embedder that
// cannot take a batch (Gemini on Vertex AI; a batch larger than its MaxEmbedBatch) is
// skipped as a local refusal.
//
// Batching: the inputs are split, in order, into batches of at most the smallest
// MaxEmbedBatch of the route's Embedders (so that any of them can take any batch on
// failover) and at most 250,000 estimated tokens (OpenAI's limit of 300,000 summed over a
// request, with margin). Each batch is a call through the layers of its own, with its own
// attempts, caps, retry budget and events (Event.Embed is set; each batch has its own
// CallID). At most req.Concurrency batches (default 4) are in flight at once.
//
// Every vector of the answer has one length. When the route has more than one upstream,
// the first batch runs alone; the others then start on the upstream that answered it
// (ahead of the route's strategy, unless CallOptions.Pin orders the route) so that all
// vectors come from one model wherever possible, and fail over to the rest of the route.
// An attempt whose vectors have another length than the first batch's (or than
// req.Dimensions, when set) fails with failure.Unavailable and ErrDimensionMismatch and moves
// on to the next upstream: an upstream of another dimension never serves part of a call.
//
// The response holds the vectors in input order, the sum of the batches' Usage (a batch
// whose vendor reports none counts the Client's estimate and marks the sum Estimated),
// the upstream of the first batch, and every batch's trace in batch order
// (Attempt.Batch). When a batch fails, the batches in flight are canceled, those not
// started are not sent, and the call returns the failed batch's *Error, carrying every
// trace so far. Vectors of the batches that succeeded are not returned.
//
// A nil request, an empty Input, an empty text, Dimensions below 0 or above 65,536, or a
// negative Concurrency is a failure.BadRequest error before any call. When no Embedder of the
// route reports a MaxEmbedBatch of at least 1, the call fails with failure.BadRequest wrapping
// ErrUnsupported. Embed is safe for concurrent use.
func (c *Client) Embed(ctx context.Context, req *EmbedRequest) (*EmbedResponse, error) {
	if err := checkEmbedRequest(req); err != nil {
		return nil, err
	}
	route := c.embedRoute(req.Model)
	if len(route) == 0 {
		return nil, &Error{Class: failure.NotFound, Model: req.Model, Err: ErrNoUpstream,
			Message: "no upstream that embeds serves model " + strconv.Quote(req.Model)}
	}
	size := embedBatchSize(route)
	if size <= 0 {
		return nil, &Error{Class: failure.BadRequest, Model: req.Model, Err: ErrUnsupported,
			Message: "no embedding upstream of model " + strconv.Quote(req.Model) + " reports a MaxEmbedBatch of at least 1"}
	}
	job := &embedJob{c: c, req: req, route: route, begun: !c.closed.Load()}
	job.dims.Store(int64(req.Dimensions))
	job.plan(size)
	return job.run(ctx)
}

// checkEmbedRequest refuses what no upstream could serve, before any call.
func checkEmbedRequest(req *EmbedRequest) error {
	bad := func(msg string) error { return &Error{Class: failure.BadRequest, Message: msg} }
	switch {
	case req == nil:
		return bad("nil embed request")
	case len(req.Input) == 0:
		return &Error{Class: failure.BadRequest, Model: req.Model, Message: "embed request has no input"}
	case req.Dimensions < 0:
		return &Error{Class: failure.BadRequest, Model: req.Model, Message: "embed Dimensions " + strconv.Itoa(req.Dimensions) + " is negative"}
	case req.Dimensions > maxEmbedDimensions:
		return &Error{Class: failure.BadRequest, Model: req.Model,
			Message: "embed Dimensions " + strconv.Itoa(req.Dimensions) + " is above the largest supported, " + strconv.Itoa(maxEmbedDimensions)}
	case req.Concurrency < 0:
		return &Error{Class: failure.BadRequest, Model: req.Model, Message: "embed Concurrency " + strconv.Itoa(req.Concurrency) + " is negative"}
	}
	for i, s := range req.Input {
		if s == "" {
			return &Error{Class: failure.BadRequest, Model: req.Model, Message: "embed input " + strconv.Itoa(i) + " is empty"}
		}
	}
	return nil
}

// embedRoute is the route of model without the upstreams that cannot embed. It is the
// cached route itself when every upstream of it embeds.
func (c *Client) embedRoute(model string) []*upstream {
	route := c.route(model)
	for i, up := range route {
		if _, ok := up.Provider.(Embedder); !ok {
			out := append(make([]*upstream, 0, len(route)-1), route[:i]...)
			for _, up := range route[i+1:] {
				if _, ok := up.Provider.(Embedder); ok {
					out = append(out, up)
				}
			}
			return out
		}
	}
	return route
}

// embedBatchSize is the smallest MaxEmbedBatch of at least 1 among the route's Embedders,
// or 0 when none reports one. An Embedder that reports less is refused locally when a
// batch reaches it (callEmbed).
func embedBatchSize(route []*upstream) int {
	size := 0
	for _, up := range route {
		if n := up.Provider.(Embedder).MaxEmbedBatch(); n >= 1 && (size == 0 || n < size) {
			size = n
		}
	}
	return size
}

// embedJob is one Client.Embed call: its batches and what they share.
type embedJob struct {
	c       *Client
	req     *EmbedRequest
	route   []*upstream
	batches []embedBatch
	// dims is the vector length every batch must answer with: the request's Dimensions,
	// else the first answer's; 0 until known.
	dims atomic.Int64
	// begun: the Client was open when the call began, so its batches run even if Close
	// comes while they do (a call in flight finishes).
	begun bool
}

// plan splits the inputs into batches of at most size inputs and embedBatchTokens
// estimated tokens, each charged its estimate.
func (j *embedJob) plan(size int) {
	lc := &j.c.cfg.limiter
	var est estimate.Estimator = estimate.Heuristic{}
	if lc.estimator != nil {
		est = lc.estimator
	}
	ratio := lc.ratioFor(j.req.Model)
	in := j.req.Input
	chat := Request{Model: j.req.Model, Metadata: j.req.Metadata, Priority: j.req.Priority}
	start, tokens := 0, 0
	flush := func(end int) {
		b := embedBatch{job: j, index: len(j.batches), chat: chat, req: *j.req}
		b.req.Input = in[start:end:end]
		b.cost = correct(tokens, ratio)
		j.batches = append(j.batches, b)
		start, tokens = end, 0
	}
	for i, text := range in {
		n := max(est.CountTokens(j.req.Model, text), 0)
		if i > start && (i-start >= size || tokens+n > embedBatchTokens) {
			flush(i)
		}
		tokens = satAdd(tokens, n)
	}
	flush(len(in))
}

// correct applies the model's token ratio to an estimate, saturating.
func correct(n int, ratio float64) int {
	if ratio == 1 {
		return n
	}
	f := float64(n) * ratio
	if f >= float64(maxInt/2) {
		return maxInt / 2
	}
	return int(f + 0.999999)
}

// run sends the batches and assembles the answer. With more than one upstream in the
// route, the first batch runs alone and fixes the upstream the others start on.
func (j *embedJob) run(ctx context.Context) (*EmbedResponse, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rest := j.batches
	if len(j.route) > 1 && len(rest) > 1 {
		b := &rest[0]
		j.c.embedBatch(ctx, b, j.route)
		if b.err != nil {
			return nil, j.failure(b)
		}
		rest = rest[1:]
		route, ctxRest := j.pinned(ctx, b.up)
		if err := j.concurrently(ctxRest, cancel, rest, route); err != nil {
			return nil, err
		}
		return j.answer(), nil
	}
	if err := j.concurrently(ctx, cancel, rest, j.route); err != nil {
		return nil, err
	}
	return j.answer(), nil
}

// pinned is the route of the batches after the first: up first, then the rest of the
// route in its order, and a context whose CallOptions keep that order (routing.Ordered)
// unless they set a Routing of their own.
func (j *embedJob) pinned(ctx context.Context, up *upstream) ([]*upstream, context.Context) {
	route := make([]*upstream, 0, len(j.route))
	route = append(route, up)
	for _, u := range j.route {
		if u != up {
			route = append(route, u)
		}
	}
	o := callOptions(ctx)
	if o != nil && o.Routing != routing.Default {
		return route, ctx
	}
	if o == nil && j.c.strategy(j.req.Model, nil) <= routing.Ordered {
		return route, ctx // no strategy would reorder it: no options to add
	}
	var pin CallOptions
	if o != nil {
		pin = *o
	}
	pin.Routing = routing.Ordered
	return route, WithCallOptions(ctx, pin)
}

// concurrently runs batches on route, at most the request's Concurrency at once. The first
// batch to fail cancels the others (through cancel, the call's); it returns that batch's
// error, carrying every trace so far.
func (j *embedJob) concurrently(ctx context.Context, cancel context.CancelFunc, batches []embedBatch, route []*upstream) error {
	n := j.req.Concurrency
	if n == 0 {
		n = defaultEmbedConcurrency
	}
	n = min(n, len(batches))
	var (
		wg     sync.WaitGroup
		next   atomic.Int64
		failed atomic.Pointer[embedBatch]
	)
	work := func() {
		defer wg.Done()
		for {
			i := int(next.Add(1)) - 1
			if i >= len(batches) || ctx.Err() != nil {
				return
			}
			b := &batches[i]
			j.c.embedBatch(ctx, b, route)
			if b.err != nil {
				if failed.CompareAndSwap(nil, b) {
					cancel()
				}
				return
			}
		}
	}
	wg.Add(n)
	for range n - 1 {
		go work()
	}
	work()
	wg.Wait()
	if b := failed.Load(); b != nil {
		return j.failure(b)
	}
	if err := ctx.Err(); err != nil { // canceled between batches: some never ran
		for i := range batches {
			if b := &batches[i]; !b.ran {
				b.err = &Error{Class: ClassOf(err), Model: j.req.Model, Err: err}
				return j.failure(b)
			}
		}
	}
	return nil
}

// failure is the call's error for the failed batch b: a copy of its error carrying the
// traces of every batch that ran, in batch order.
func (j *embedJob) failure(b *embedBatch) error {
	e := *b.err
	e.Attempts = j.traces()
	if j.c.cost != nil {
		e.Cost = traceCost(e.Attempts)
	}
	return &e
}

// traces is every batch's trace, in batch order, with Attempt.Batch set.
func (j *embedJob) traces() []Attempt {
	n := 0
	for i := range j.batches {
		n += len(j.batches[i].trace)
	}
	out := make([]Attempt, 0, n)
	for i := range j.batches {
		for _, at := range j.batches[i].trace {
			at.Batch = i
			out = append(out, at)
		}
	}
	return out
}

// answer assembles the batches' answers, all of which succeeded.
func (j *embedJob) answer() *EmbedResponse {
	first := j.batches[0].resp
	out := &EmbedResponse{Model: first.Model, Upstream: first.Upstream, RateLimits: first.RateLimits,
		Vectors: make([][]float32, 0, len(j.req.Input)), Attempts: j.traces()}
	for i := range j.batches {
		r := j.batches[i].resp
		out.Vectors = append(out.Vectors, r.Vectors...)
		u := &out.Usage
		u.InputTokens = satAdd(u.InputTokens, max(r.Usage.InputTokens, 0))
		u.TotalTokens = satAdd(u.TotalTokens, max(r.Usage.TotalTokens, 0))
		u.CachedInputTokens = satAdd(u.CachedInputTokens, max(r.Usage.CachedInputTokens, 0))
		u.Estimated = u.Estimated || r.Usage.Estimated
		out.Fallback = out.Fallback || r.Fallback
	}
	if j.c.cost != nil {
		out.Cost = traceCost(out.Attempts)
	}
	return out
}
