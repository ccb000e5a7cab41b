package otel

import (
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
)

// callKey finds a call's tracing state in its context.
type callKey struct{}

// The span kinds as options, made once.
var (
	kindClient   = trace.WithSpanKind(trace.SpanKindClient)
	kindInternal = trace.WithSpanKind(trace.SpanKindInternal)
)

// call is the tracing state of one call: a typed call whose span is recorded (or that
// must keep its events apart from an enclosing call's), or any call in transport mode. It
// is the context the call runs with: the caller's, with the call span (once started),
// answering callKey with itself, so that the Client's events for the call, which carry
// that context, find it.
//
// Events of one call arrive in order, but those of a stream's end may come from another
// goroutine than the caller's (a timer, the reader), and the front door's own check runs
// on the caller's: mu orders them.
type call struct {
	context.Context
	t     *Telemetry
	op    string
	start time.Time // for a span started late (transport mode)

	mu sync.Mutex
	// span is the call span; parent the context its children start from. In transport
	// mode the span starts at the call's first event, so that requests the transport
	// passes through untouched get none. recording is span.IsRecording() at its start.
	span      trace.Span
	parent    context.Context
	recording bool
	failover  bool // the next attempt follows a failover
	ended     bool
	// drop ends the span of a stream's call that was dropped (see watch).
	drop *droppedCall
	// params are the request's parameters, given to a recorded call span with its end
	// attributes (see startEntry).
	params []attribute.KeyValue
	// id is the Client's ID of the call, from its first event: events of another call
	// that share the context (a Client without Middleware called inside this call, by a
	// fallback function) are not this call's.
	id uint64
	// buf holds the attributes and options of one span operation at a time, under mu:
	// the tracer copies what it is given, so the call allocates them once.
	buf       [16]attribute.KeyValue
	startOpts [3]trace.SpanStartOption
	endOpts   [1]trace.SpanEndOption
}

// owns reports whether e belongs to c's call, adopting e's call ID on the first event.
// c.mu is held.
func (c *call) owns(e *llmclient.Event) bool {
	switch {
	case e.CallID == 0 || c.id == e.CallID:
		return true
	case c.id == 0:
		c.id = e.CallID
		return true
	}
	return false
}

// Value answers callKey with c and everything else from the caller's context.
func (c *call) Value(key any) any {
	if _, ok := key.(callKey); ok {
		return c
	}
	return c.Context.Value(key)
}

// callOf returns the tracing state of the call ctx belongs to, or nil.
func (t *Telemetry) callOf(ctx context.Context) *call {
	if ctx == nil {
		return nil
	}
	c, _ := ctx.Value(callKey{}).(*call)
	if c == nil || c.t != t {
		return nil
	}
	return c
}

// Middleware starts a span for every Complete and Stream call (llmclient.WithMiddleware
// (t.Middleware)) and puts it in the call's context, so that the attempt spans Observe
// makes are its children, as are spans that code below it starts (other middleware, the
// HTTP client of an adapter instrumented with otelhttp). The span ends when the call
// does: for a stream, when it ends, is closed or its timeouts end it, after Stream has
// returned. Add it first, outside other middleware, to see their work in the span.
//
// A call whose span the sampler does not record runs with the span in its context and
// nothing else: its events record metrics only, and the span ends when the front door
// returns.
func (t *Telemetry) Middleware(next llmclient.Handler) llmclient.Handler {
	return &handler{t: t, next: next}
}

type handler struct {
	t    *Telemetry
	next llmclient.Handler
}

func (h *handler) Complete(ctx context.Context, req *llmclient.Request) (*llmclient.Response, error) {
	ctx, span, c := h.t.begin(ctx, req)
	if c == nil {
		defer span.End() // a panic below ends it too
		return h.next.Complete(ctx, req)
	}
	defer c.panicked()
	resp, err := h.next.Complete(c, req)
	c.finish(resp, err)
	return resp, err
}

func (h *handler) Stream(ctx context.Context, req *llmclient.Request) (*llmclient.Stream, error) {
	ctx, span, c := h.t.begin(ctx, req)
	if c == nil {
		defer span.End()
		return h.next.Stream(ctx, req)
	}
	defer c.panicked()
	s, err := h.next.Stream(c, req)
	if err != nil || s == nil {
		c.finish(nil, err)
		return s, err
	}
	// A stream from the Client ends its span with its event.Call; one that inner
	// middleware made (a cache's replay) when it ends or is closed, or once dropped.
	c.watch()
	return s.Tap(nil, c.finish), nil
}

// watch arranges for the call span of a stream to end once the call's state, c, becomes
// unreachable without it having ended: a stream that inner middleware made (a cache's
// replay, llmclient.StreamOf) that the caller dropped without Close, which no event ends.
// A Client's stream needs none (its own cleanup ends the call, with an event.Call), but
// the two cannot be told apart here, and ending on c's collection, rather than the
// stream's, never races the Client's: whatever can still tell c of the call's events holds
// a context that reaches c.
func (c *call) watch() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended || !c.recording {
		return
	}
	c.drop = &droppedCall{span: c.span, params: c.params}
	runtime.AddCleanup(c, (*droppedCall).end, c.drop)
}

// droppedCall is what ends the span of a call that became unreachable before its end. It
// must hold nothing that reaches the call's state.
type droppedCall struct {
	done   atomic.Bool // the call ended as it does
	span   trace.Span
	params []attribute.KeyValue
}

// droppedStatus is the status description of a call span ended by droppedCall.
const droppedStatus = "llmclient: canceled: the stream was dropped without Close"

func (d *droppedCall) end() {
	if d.done.Load() {
		return
	}
	d.span.SetAttributes(append(d.params[:len(d.params):len(d.params)], str(keyErrorType, failure.Canceled.String()))...)
	d.span.SetStatus(codes.Error, droppedStatus)
	d.span.End()
}

// markEnded records that the call span ends now. c.mu is held.
func (c *call) markEnded() {
	c.ended = true
	if c.drop != nil {
		c.drop.done.Store(true)
	}
}

// begin starts the call span of a typed call and returns the context the call runs
// with. A recorded call gets its tracing state, c; an unrecorded one none, and the
// context with its span, unless the caller's context belongs to a call of t (a Client
// called inside another's call): then c keeps that call's events apart.
func (t *Telemetry) begin(ctx context.Context, req *llmclient.Request) (context.Context, trace.Span, *call) {
	st := t.starts.lastFor(opChat, req)
	if st == nil {
		k := startKeyOf(opChat, req)
		st = t.starts.get(&k)
	}
	sctx, span := t.tracer.Start(ctx, st.name, st.opts...)
	recording := span.IsRecording()
	if !recording && t.callOf(ctx) == nil {
		return sctx, span, nil
	}
	c := &call{Context: sctx, t: t, op: opChat, span: span, parent: sctx, recording: recording, params: st.params}
	return sctx, span, c
}

// Transport wraps base, a Client's transport (client.Transport(nil)), so that every call
// it protects gets a call span with its attempt spans, as Middleware gives typed calls.
// The call span starts, with the time the request arrived, at the call's first event, and
// ends when the call does (for a response whose body is still streaming, when the body
// ends or is closed); requests the Client's transport passes through untouched get no
// span. The operation is "embeddings" or "generate_content" for those API paths, else
// "chat". A nil base is http.DefaultTransport. An observer that panics on the call's last
// event, sent as the body is read to its end or closed, ends the span as failed (status
// "panic") and the panic goes on to the reader, as it does from RoundTrip.
func (t *Telemetry) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{t: t, base: base}
}

type transport struct {
	t    *Telemetry
	base http.RoundTripper
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := &call{Context: req.Context(), t: tr.t, op: operationOf(req.URL.Path), start: time.Now()}
	defer c.panicked()
	resp, err := tr.base.RoundTrip(req.WithContext(c))
	if err != nil {
		var e *llmclient.Error
		if errors.As(err, &e) {
			c.finish(nil, err) // refused before any event (a body it could not read, an SDK retry)
		}
		return resp, err
	}
	if resp != nil && resp.Body != nil && c.open() {
		if _, upgraded := resp.Body.(io.Writer); !upgraded { // a 101's body is read and written
			resp.Body = &callBody{ReadCloser: resp.Body, c: c}
		}
	}
	return resp, err
}

// open reports whether c's call span started and has not ended: a body that will end it
// is still to be read.
func (c *call) open() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.span != nil && !c.ended
}

// callBody is the body of a transport call whose span its end will end (a stream's end,
// or its Close, sends the call's event.Call). An observer before Observe that panics on
// that event panics in the reader's Read or Close, where RoundTrip's recovery is gone:
// callBody ends the span then, as failed, and panics on with the same value, as the front
// doors do, instead of leaving the span open for the process's life.
type callBody struct {
	io.ReadCloser
	c *call
}

func (b *callBody) Read(p []byte) (int, error) {
	defer b.c.panicked()
	return b.ReadCloser.Read(p)
}

func (b *callBody) Close() error {
	defer b.c.panicked()
	return b.ReadCloser.Close()
}

// CloseIdleConnections closes the base transport's idle connections, when it can.
func (tr *transport) CloseIdleConnections() {
	if ci, ok := tr.base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// operationOf names the GenAI operation of an API path.
func operationOf(path string) string {
	switch {
	case strings.HasSuffix(path, "/embeddings") || strings.HasSuffix(path, ":embedContent") ||
		strings.HasSuffix(path, ":batchEmbedContents"):
		return "embeddings"
	case strings.HasSuffix(path, ":generateContent") || strings.HasSuffix(path, ":streamGenerateContent"):
		return "generate_content"
	}
	return opChat
}

// ensure starts the call span of a transport call at its first event. c.mu is held.
func (c *call) ensure(model string) {
	if c.span != nil {
		return
	}
	st := c.t.starts.get(&startKey{op: c.op, model: clampValue(model)})
	opts := append(append(c.startOpts[:0], st.opts...), trace.WithTimestamp(c.start))
	c.parent, c.span = c.t.tracer.Start(c.Context, st.name, opts...)
	c.recording = c.span.IsRecording()
}

// attempt records an attempt's span, a child of the call span, from its start to its
// end. s is the attribute set of its metrics, nil for a local refusal.
func (c *call) attempt(e *llmclient.Event, s *setEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended || !c.owns(e) {
		return
	}
	c.ensure(e.Model)
	if !c.recording {
		return // attempt spans follow their call span's sampling
	}
	t := c.t
	if s == nil || s.name == "" || s.key.op != c.op {
		k := setKey{kind: setAttemptSpan, op: c.op, upstream: clampValue(e.Upstream), model: clampValue(e.Model)}
		s = t.sets.get(k, func() *setEntry { return t.withAttemptSpan(&setEntry{}, k.op, k.upstream, k.model) })
	}
	start, end := e.Start, e.Time
	if start.IsZero() || start.After(end) {
		start = end
	}
	endAt := trace.WithTimestamp(end)
	c.startOpts[0], c.startOpts[1] = endAt, kindInternal
	if start != end {
		c.startOpts[0] = trace.WithTimestamp(start)
	}
	_, span := t.tracer.Start(c.parent, s.name, c.startOpts[:2]...)
	attrs := append(c.buf[:0], s.span...)
	attrs = append(attrs, keyAttempt.Int(e.Attempt))
	if e.Key != "" {
		attrs = append(attrs, str(keyKey, e.Key))
	}
	if e.Status != 0 {
		attrs = append(attrs, keyStatus.Int(e.Status))
	}
	if e.Waited > 0 {
		attrs = append(attrs, keyWaited.Float64(e.Waited.Seconds()))
	}
	if e.LimiterWait > 0 {
		attrs = append(attrs, keyLimiterWait.Float64(e.LimiterWait.Seconds()))
	}
	if e.Local {
		attrs = append(attrs, keyLocal.Bool(true))
	}
	if e.Retry {
		attrs = append(attrs, keyRetry.Bool(true))
	}
	if e.Hedge {
		attrs = append(attrs, keyHedge.Bool(true))
	}
	if c.failover {
		attrs = append(attrs, keyFailover.Bool(true))
		c.failover = false
	}
	if e.EstimatedTokens > 0 {
		attrs = append(attrs, keyEstimated.Int(e.EstimatedTokens))
	}
	if e.InputTokens > 0 || e.OutputTokens > 0 {
		attrs = append(attrs, keyInputTokens.Int(e.InputTokens), keyOutputTokens.Int(e.OutputTokens))
		if e.UsageEstimated {
			attrs = append(attrs, keyUsageEstimated.Bool(true))
		}
	}
	if e.TimeToFirstToken > 0 {
		attrs = append(attrs, keyTTFC.Float64(e.TimeToFirstToken.Seconds()))
	}
	if et := errorType(e.Class); et != "" {
		attrs = append(attrs, str(keyErrorType, et))
		span.SetStatus(codes.Error, t.errText(e.Err, et))
	}
	span.SetAttributes(attrs...)
	c.endOpts[0] = endAt
	span.End(c.endOpts[:]...)
}

// decision adds a span event for a failover, fallback, key cooldown, eviction or alert.
func (c *call) decision(e *llmclient.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended || !c.owns(e) {
		return
	}
	c.ensure(e.Model)
	if e.Kind == event.Failover {
		c.failover = true
	}
	if !c.recording {
		return
	}
	attrs := c.buf[:0]
	if e.Upstream != "" {
		attrs = append(attrs, str(keyUpstream, e.Upstream))
	}
	if e.Key != "" {
		attrs = append(attrs, str(keyKey, e.Key))
	}
	if et := errorType(e.Class); et != "" {
		attrs = append(attrs, str(keyErrorType, et))
	}
	switch e.Kind {
	case event.Failover, event.Hedge:
		attrs = append(attrs, str(keyTarget, e.Target))
	case event.Continuation:
		attrs = append(attrs, str(keyTarget, e.Target), str(keyAction, e.Action))
	case event.Fallback:
		c.span.SetAttributes(keyFallback.Bool(true))
	case event.KeyCooldown, event.KeyEvicted:
		attrs = append(attrs, str(keyUntil, e.Until.UTC().Format(time.RFC3339Nano)))
	}
	opts := []trace.EventOption{trace.WithAttributes(attrs...)}
	if !e.Time.IsZero() {
		opts = append(opts, trace.WithTimestamp(e.Time))
	}
	c.span.AddEvent("llmclient."+e.Kind.String(), opts...)
}

// end ends the call span with the call's outcome, at the call's end. s is the attribute
// set of the call's metrics.
func (c *call) end(e *llmclient.Event, s *setEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended || !c.owns(e) {
		return
	}
	c.ensure(e.Model)
	c.markEnded()
	if !c.recording {
		c.span.End()
		return
	}
	attrs := append(c.buf[:0], keyAttempts.Int(e.Attempt))
	attrs = append(attrs, s.span...) // provider, upstream, response model
	if s.key.respModel == responseModelOther {
		attrs = append(attrs, str(keyResponseModel, e.ResponseModel)) // the metrics' is bounded
	}
	attrs = append(attrs, c.params...)
	if e.FinishReason != finish.None {
		attrs = append(attrs, finishReasons(e.FinishReason))
	}
	if e.InputTokens > 0 || e.OutputTokens > 0 {
		attrs = append(attrs, keyInputTokens.Int(e.InputTokens), keyOutputTokens.Int(e.OutputTokens))
		if e.UsageEstimated {
			attrs = append(attrs, keyUsageEstimated.Bool(true))
		}
	}
	if e.Status != 0 {
		attrs = append(attrs, keyStatus.Int(e.Status))
	}
	if e.CallID != 0 {
		attrs = append(attrs, keyCallID.Int64(int64(e.CallID)))
	}
	if e.Partition != "" {
		attrs = append(attrs, str(keyPartition, e.Partition))
	}
	if e.Chunks > 0 { // a stream that got its first chunk
		attrs = append(attrs, keyTTFC.Float64(e.TimeToFirstToken.Seconds()), keyChunks.Int(e.Chunks))
	}
	if et := errorType(e.Class); et != "" {
		attrs = append(attrs, str(keyErrorType, et))
		c.span.SetStatus(codes.Error, c.t.errText(e.Err, et))
	}
	c.span.SetAttributes(attrs...)
	if e.Time.IsZero() {
		c.span.End()
		return
	}
	c.endOpts[0] = trace.WithTimestamp(e.Time)
	c.span.End(c.endOpts[:]...)
}

// finish ends the call span after its front door returned (or, for a stream that inner
// middleware made, after it ended), unless the call's event.Call already did: a call the
// Client refused before any attempt (a bad request, a caller partition at its limit) or
// that middleware below answered. In transport mode a call without events has no span,
// and gets one only for an llmclient error.
func (c *call) finish(resp *llmclient.Response, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return
	}
	if c.span == nil {
		var e *llmclient.Error
		if !errors.As(err, &e) {
			return
		}
		c.ensure(e.Model)
	}
	if c.span == nil {
		return
	}
	c.markEnded()
	if !c.recording {
		c.span.End()
		return
	}
	attrs := append(c.buf[:0], c.params...)
	switch {
	case errors.Is(err, llmclient.ErrPanicked): // a stream's end, as an observer panicked on it
		attrs = append(attrs, str(keyErrorType, errorTypeOther))
		c.span.SetStatus(codes.Error, "panic")
	case err != nil:
		et := llmclient.ClassOf(err).String()
		attrs = append(attrs, str(keyErrorType, et))
		c.span.SetStatus(codes.Error, c.t.errText(err, et))
	case resp != nil:
		if resp.Upstream != "" {
			attrs = append(attrs, str(keyProvider, c.t.providerName(resp.Upstream)), str(keyUpstream, resp.Upstream))
		}
		if resp.Model != "" {
			attrs = append(attrs, str(keyResponseModel, resp.Model))
		}
		if resp.FinishReason != finish.None {
			attrs = append(attrs, finishReasons(resp.FinishReason))
		}
		if u := resp.Usage; u.InputTokens > 0 || u.OutputTokens > 0 {
			attrs = append(attrs, keyInputTokens.Int(u.InputTokens), keyOutputTokens.Int(u.OutputTokens))
			if u.Estimated {
				attrs = append(attrs, keyUsageEstimated.Bool(true))
			}
		}
	}
	if len(attrs) > 0 {
		c.span.SetAttributes(attrs...)
	}
	c.span.End()
}

// panicked, deferred by the front door, ends the call span of a call that panicked
// below it (an observer that panicked on one of the call's events, a middleware), as
// failed, and panics on with the same value: the span must not stay open for the
// process's life.
func (c *call) panicked() {
	v := recover()
	if v == nil {
		return
	}
	c.mu.Lock()
	if !c.ended && c.span != nil {
		c.markEnded()
		if c.recording {
			c.span.SetAttributes(append(append(c.buf[:0], c.params...), str(keyErrorType, errorTypeOther))...)
			c.span.SetStatus(codes.Error, "panic")
		}
		c.span.End()
	}
	c.mu.Unlock()
	panic(v)
}

// errText is the span status description of a failure of class: without
// WithErrorMessages, the failure named from the fields of the Client's error that hold no
// text of the call (see statusText); with it, the error's whole text. The Client's errors
// never hold a key.
func (t *Telemetry) errText(err error, class string) string {
	if err == nil {
		return class
	}
	if t.errorMessages {
		return err.Error()
	}
	return statusText(err, class)
}

// statusText names a failure of class without the vendor's message or a body snippet
// (llmclient.ErrorSummary), or by its class when that says nothing.
func statusText(err error, class string) string {
	if s := llmclient.ErrorSummary(err); s != "" {
		return clampValue(s)
	}
	return class
}
