package llmclient

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/llmclient/llmclient/failure"
)

// embedBatch is one batch of a Client.Embed call, sent as a call of its own through the
// layers (embedChain): its run carries it (run.emb) to every attempt.
type embedBatch struct {
	job   *embedJob
	index int
	// req is the caller's request with this batch's inputs; chat is what the layers read
	// of a call: its model, metadata and priority.
	req  EmbedRequest
	chat Request
	// cost is the batch's estimated tokens, charged to the limiters.
	cost int

	// The outcome, once the batch ran: the answer and the upstream that gave it, or the
	// final error; trace either way.
	ran   bool
	resp  *EmbedResponse
	up    *upstream
	trace []Attempt
	err   *Error
}

// embedBatch sends b on route as one call and stores its outcome in b.
func (c *Client) embedBatch(ctx context.Context, b *embedBatch, route []*upstream) {
	b.ran = true
	r := runPool.Get().(*run)
	defer r.recycle()
	defer r.cleanup() // before recycle: a panicking hook leaves nothing held
	r.emb, r.cost, r.prompt = b, b.cost, satAdd(b.cost, 1)
	if err := c.begin(ctx, r, &b.chat, route, nil, c.embedChain, false); err != nil {
		b.err = embedError(err, b)
		return
	}
	a, err := r.exec(ctx)
	if err != nil {
		r.releasePartition(nil)
		r.detachTrace()
		final := r.final(err)
		r.ended(nil, final, nil)
		b.err, b.trace = final, final.Attempts
		return
	}
	r.detachTrace()
	resp := r.succeed(a, a.resp)
	if resp.RateLimits == nil {
		a.unreported()
	}
	r.called(resp, nil, nil)
	out := a.embed
	out.Usage, out.Upstream, out.Fallback, out.Attempts = resp.Usage, resp.Upstream, resp.Fallback, resp.Attempts
	if out.Model == "" {
		out.Model = resp.Model
	}
	b.resp, b.up, b.trace = out, a.up, resp.Attempts
}

// embedError is the *Error of a batch that begin refused.
func embedError(err error, b *embedBatch) *Error {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Class: ClassOf(err), Model: b.chat.Model, Err: err}
	}
	return e
}

// callEmbed is the innermost step of an embedding attempt: the upstream's Embedder. An
// upstream that cannot embed, or not a batch this large, refuses it locally (ErrUnsupported),
// so that the batch moves on; an answer that is not one vector per input, of the call's
// length, fails the attempt.
func (c *Client) callEmbed(ctx context.Context, a *attempt) error {
	b := a.r.emb
	e, ok := a.up.Provider.(Embedder)
	if !ok {
		return &Error{Class: failure.BadRequest, Err: ErrUnsupported, Message: "the upstream's provider does not embed"}
	}
	if n := e.MaxEmbedBatch(); n < len(b.req.Input) {
		return &Error{Class: failure.BadRequest, Err: ErrUnsupported,
			Message: "the upstream takes at most " + strconv.Itoa(n) + " inputs per embedding call (its MaxEmbedBatch); the batch has " + strconv.Itoa(len(b.req.Input))}
	}
	call := EmbedCall{Request: &b.req, Model: a.call.Model, APIKey: a.call.APIKey, Headers: a.call.Headers}
	resp, err := e.Embed(ctx, &call)
	a.call.Notes = call.Notes
	if err != nil {
		return err
	}
	if resp == nil {
		return &Error{Class: failure.Unknown, Message: "provider returned neither an embedding response nor an error"}
	}
	if err := b.job.check(resp, len(b.req.Input)); err != nil {
		return err
	}
	a.embed = resp
	a.resp = &Response{Model: resp.Model, Usage: resp.Usage, RateLimits: resp.RateLimits, Status: http.StatusOK}
	return nil
}

// check verifies that resp holds n vectors of the call's length; the first answer of a
// call without Dimensions fixes that length.
func (j *embedJob) check(resp *EmbedResponse, n int) *Error {
	if len(resp.Vectors) != n {
		return &Error{Class: failure.ServerError, Message: "embedding answer has " + strconv.Itoa(len(resp.Vectors)) +
			" vectors for " + strconv.Itoa(n) + " inputs"}
	}
	l := len(resp.Vectors[0])
	for _, v := range resp.Vectors {
		if len(v) == 0 || len(v) != l {
			return &Error{Class: failure.ServerError, Message: "embedding answer has an empty vector or mixes vector lengths"}
		}
	}
	want := j.dims.Load()
	if want == 0 && j.dims.CompareAndSwap(0, int64(l)) {
		return nil
	}
	if want == 0 {
		want = j.dims.Load()
	}
	if int64(l) != want {
		return &Error{Class: failure.Unavailable, Err: ErrDimensionMismatch,
			Message: "vectors of length " + strconv.Itoa(l) + " where the call's have " + strconv.FormatInt(want, 10)}
	}
	return nil
}
