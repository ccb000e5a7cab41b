package llmclient

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net/http"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient/event"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/headers"
)

// defaultMaxReplayBody is the largest request body the transport buffers so that retries
// and failover can send it again: 32 MiB. A larger body is sent once, without retry,
// unless the request can recreate it (http.Request.GetBody, which SDKs set for their
// in-memory bodies). It also bounds how much of a successful one-shot response is read
// before it is handed over.
const defaultMaxReplayBody = 32 << 20

// ErrSDKRetry: a request carried an SDK retry counter above zero (X-Stainless-Retry-Count,
// sent by openai-go and anthropic-sdk-go) and the transport no longer remembered the
// failure it answered the SDK's first try with; or a request repeated a failed one within
// the repeat window (WithRepeatWindow) when its logical call had no attempt left. The
// transport had already applied its retry policy to that request, so it makes no further
// upstream attempt.
var ErrSDKRetry = errors.New("llmclient: SDK retry not sent: the transport already retried this request (set the SDK's max retries to 0)")

// TransportOption configures a Transport.
type TransportOption interface {
	applyTransport(*transportConfig)
}

type transportOptionFunc func(*transportConfig)

func (f transportOptionFunc) applyTransport(c *transportConfig) { f(c) }

type transportConfig struct {
	maxBody      int64
	repeatWindow time.Duration
	strict       bool
	passUnpriced bool
}

// WithPassUnpriced sets what the budgets (WithBudget) do with a request whose API shape
// the upstream's Dialect does not recognize (OpenAI's legacy completions, images, audio;
// any path Inspect reports false for) and whose method can create work (any but GET,
// HEAD, OPTIONS and DELETE): such a request has no model or tokens to price, so by
// default each budget that counts it applies its Unpriced policy, as for an attempt on an
// unpriced model (budget.UnpricedRefuse, the default, refuses it before any call; the SDK
// gets a 403 in the vendor's error format). pass true sends such requests uncounted by
// every budget. Default false. Reads are never counted.
//
// A request of a shape the Dialect prices (chat completions, messages, …) whose body is
// too large to read (WithMaxReplayBody) is not of an unrecognized shape, and this option
// does not apply to it: its model, and so its price, is known only from its answer. Every
// budget that counts it admits it before the call under the least reservation, one
// picodollar (its UnpricedCost under budget.UnpricedCharge), so that a budget at its cap
// refuses it, and counts the cost its answer reports (the cost of its event.Call); an
// answer whose model has no price counts that reservation. A budget scoped to a model (budget.ScopeModel)
// does not count it: its model is not known when the budgets are asked.
func WithPassUnpriced(pass bool) TransportOption {
	return transportOptionFunc(func(c *transportConfig) { c.passUnpriced = pass })
}

// unbudgeted reports whether the budgets let the call pass uncounted: a path the dialect
// does not know, read only or passed by WithPassUnpriced.
func (x *txCall) unbudgeted() bool {
	if x.known {
		return false
	}
	switch x.req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodDelete:
		return true
	}
	return x.t.cfg.passUnpriced
}

// modelUnread reports whether the call is of a shape the dialect prices but names its
// model in a body too large to read (WithMaxReplayBody): its price is known only from its
// answer.
func (x *txCall) modelUnread() bool {
	return x.known && x.call.Request.Model == "" && x.body.unread()
}

// WithStrictMatch makes the transport refuse, without sending it, a request that matches
// no upstream's base URL (see Transport.RoundTrip's matching): the round trip fails with
// an *Error of failure.Unavailable wrapping ErrNoUpstream. Default false: such a request is
// passed to the base transport unprotected, counted (Transport.Unmatched) and reported
// once per scheme and host by an event.Alert with Action "transport_unmatched".
func WithStrictMatch(strict bool) TransportOption {
	return transportOptionFunc(func(c *transportConfig) { c.strict = strict })
}

// WithMaxReplayBody sets how large a request body the transport buffers for replay, and how
// much of a successful one-shot response it reads before handing it over. Values are
// clamped to [1 KiB, 1 GiB]. Default 32 MiB.
func WithMaxReplayBody(n int64) TransportOption {
	return transportOptionFunc(func(c *transportConfig) { c.maxBody = min(max(n, minReplayBody), maxReplayBody) })
}

// The clamps of WithMaxReplayBody.
const (
	minReplayBody = 1 << 10
	maxReplayBody = 1 << 30
)

// Transport is an http.RoundTripper that gives requests made by other SDKs (openai-go,
// anthropic-sdk-go, go-openai, or plain net/http code) the Client's protection: limiter,
// error classification, Retry-After-aware retry with the retry budget, circuit breakers,
// key pools with cooldown and eviction, failover and the stream guard. Create it with
// Client.Transport. It shares the Client's state: a Client and its transports guard the
// same upstreams together.
//
// A request is protected when its URL lies under the BaseURL of an upstream whose Provider
// implements Dialect (the longest match wins). Hosts compare by what they resolve to
// without DNS: case, a default port, a trailing dot, "localhost" against a loopback
// address and IP literal spellings do not matter; and a base path's "/v1" missing from
// the URL, or repeated in it, does not matter when the Dialect recognizes the rest as an
// API call. Any other request is passed to the base transport untouched, counted
// (Unmatched) and reported once per host (event.Alert, Action "transport_unmatched"), or
// refused under WithStrictMatch. For a protected request:
//
//   - The body is buffered once (up to WithMaxReplayBody) and replayed on every attempt;
//     the caller's request is never modified. A body that is too large and has no GetBody
//     is sent on a single attempt, without retry or failover.
//   - An API shape the Dialect recognizes (OpenAI chat completions, responses and
//     embeddings; Anthropic messages; Gemini generateContent and streamGenerateContent)
//     is estimated for the limiter and may fail over to the other upstreams of its model's
//     route (WithModelGroup, or every upstream serving the model) that speak the same
//     shape, with the URL's scheme, host and base path and the credential header
//     rewritten. A model that names a model group, or that the addressed upstream does not
//     serve, takes the group's route in its order. The upstreams a fallback brings in
//     (WithGroupFallback, a budget's Reroute group, WithContextFallback,
//     WithContentFallback) take it as they do for Complete, under their name for the
//     fallback group. Each upstream gets the model under its own name (Upstream.Models):
//     the body's top-level "model" member, or Gemini's path segment, is rewritten, and
//     nothing else. A redirect from such an alternate
//     upstream is its failure (failure.Unavailable), never handed to the caller's client,
//     which would follow it with the caller's credentials. Other paths are retried on
//     their own upstream only, classified by status, headers and body, and cost no tokens.
//   - When the upstream has a key pool (Upstream.Keys), every attempt carries the chosen
//     key in place of the caller's; without a pool, the caller's own credentials go to the
//     upstream it addressed, and an alternate upstream gets its provider's configured key.
//     None of the caller's credential headers (cookies, and every header whose name
//     speaks of auth, a key, token, secret, session, signature or password) goes to an
//     alternate upstream on another host, or to one with a key of its own on the same
//     host (another account behind the same API gateway).
//   - A streaming response is held until its first content event: before it, an error
//     status, an in-band error event, a cut or the first-token timeout is retried or
//     failed over invisibly; after it, the body is handed to the caller, who reads the
//     events unchanged, a whole event at a time. An OpenAI chat completions or Anthropic
//     messages stream that breaks after it (cut, stalled past the idle timeout, or ended
//     by an in-band error event) is continued on the route as Client.Stream continues
//     one (WithStreamContinuation, default on; WithPrefill): the caller goes on reading
//     the continuation's events, written in the first stream's terms (its id, no second
//     message start or role delta, content block indexes that go on, one finish, one
//     summed usage, one end marker); a restart whose answer diverges from what was
//     delivered fails the read with an error wrapping ErrContinuationDiverged. Other
//     streams (Gemini, the Responses API, a stream the caller asked compressed, a body
//     that cannot be replayed), and every stream with continuation off, pass the
//     upstream's bytes as they come: a read that stalls longer than the idle timeout, or
//     a stream cut before the vendor's end marker, then fails with a
//     failure.StreamInterrupted *Error. A stream of a shape the Dialect does not know is
//     passed through raw: any bytes are progress, and a read that waits longer than the
//     reasoning phase's idle limit fails the same way. After the end marker, the body is
//     read on for at most 4 KiB and 10 ms, then ends: an upstream that holds the
//     connection open after it does not hold a caller that reads to the body's end.
//   - A one-shot response is read whole (up to WithMaxReplayBody) before it is returned,
//     under the upstream's attempt timeout, so a cut body is retried too, and so is a
//     recognized call's 2xx whose body is an error object (an in-band error, as
//     OpenAI-compatible proxies send), classified like an error response; a larger one is
//     handed over while its remainder is still read, and settles when it ends: a read of
//     it that waits longer than the reasoning phase's idle limit (WithIdleTimeout) fails
//     with a failure.StreamInterrupted *Error wrapping ErrIdleTimeout.
//   - Limits apply as for Complete: the key's RPM, TPM (prompt estimate plus the output
//     bound, or WithReservedOutput; none for embeddings) and concurrency, and the caller
//     partition named by the request's context (WithPartition). The usage a response
//     reports (a stream's usage event, a one-shot body read whole by a Dialect that
//     implements UsageReader) reconciles the token charge, as for Complete.
//   - When every attempt failed, the caller gets the last upstream error response (its
//     body replayed, at most 1 MiB, with "X-Should-Retry: false" added so that SDKs do
//     not retry it again; for a stream that failed with an in-band error event, the 200
//     response with the events up to that one, so the SDK reports the vendor's error).
//     A call the Client refused itself, without an upstream response (an open breaker,
//     keys cooling or evicted, the limiter, a budget), gets an error response in the
//     addressed upstream's error format, so the SDK reports its own error type: 429 for
//     failure.RateLimited, failure.BudgetExceeded and keys cooling down after the upstream's
//     429s, 503 for the rest of failure.Unavailable, with
//     Retry-After when the Client knows when the refusal ends, "X-Should-Retry: false"
//     and "X-Llmclient-Class" naming the class. When the last attempt got no response
//     (a network failure, a timeout, the caller's context), the round trip fails with
//     the final *Error, which carries the whole attempt trace. The Client's WithFallback
//     function is not used in transport mode.
//
// One retry layer: the transport reads the X-Stainless-Retry-Count header of openai-go
// and anthropic-sdk-go. A request with a count above zero is the SDK retrying a failure
// the transport already retried, so it is answered at once with that failure (or an
// *Error wrapping ErrSDKRetry) and never reaches the upstream. SDKs that retry without a
// header (google.golang.org/genai) are recognized by the same request coming again
// shortly after a failure (WithRepeatWindow): the repeat gets only the attempts its
// logical call has left under the caps, and the same failure at once when none are left.
// Set the SDKs' own retries to 0 all the same (option.WithMaxRetries(0)): it saves their
// backoff sleeps.
//
// Every response body the transport does not return is drained (at most 64 KiB) and
// closed. Keys never appear in errors, events or returned error bodies. A Transport is
// safe for concurrent use.
type Transport struct {
	c      *Client
	base   http.RoundTripper
	cfg    transportConfig
	ups    []*txUpstream // longest base path first
	byUp   map[*upstream]*txUpstream
	chain  attemptFunc
	seed   maphash.Seed
	recent *recentFailures
	// repeats remembers failures for retries that carry no SDK header (transport_sdkretry.go).
	repeats *repeats
	// unmatched counts the requests that matched no upstream; reported holds the
	// scheme://host of those already reported, at most maxReportedHosts of them.
	unmatched atomic.Uint64
	reported  sync.Map
	reportedN atomic.Int32
	// deadlines bounds the attempts with a timer per shard (transport_deadlines.go), a
	// call taking its pooled call's shard. Its own allocation: the timers refer to it
	// until they fire, and not to the Transport.
	deadlines *[deadlineShards]deadlines
}

// maxReportedHosts bounds the hosts a Transport reports unmatched requests for.
const maxReportedHosts = 256

// Unmatched returns how many requests matched no upstream's base URL since the Transport
// was made: passed through unprotected, or refused under WithStrictMatch. Safe for
// concurrent use.
func (t *Transport) Unmatched() uint64 { return t.unmatched.Load() }

// errUnmatched is the cause reported for a request that matches no upstream.
var errUnmatched = fmt.Errorf("%w: the request's URL lies under no upstream's base URL", ErrNoUpstream)

// passUnmatched counts and reports a request that matches no upstream, then refuses it
// (WithStrictMatch) or passes it to the base transport.
func (t *Transport) passUnmatched(req *http.Request) (*http.Response, error) {
	t.unmatched.Add(1)
	if c := t.c; c.observer != nil && req.URL != nil && t.reportedN.Load() < maxReportedHosts {
		origin := strings.ToLower(req.URL.Scheme) + "://" + strings.ToLower(req.URL.Host)
		if _, loaded := t.reported.LoadOrStore(origin, struct{}{}); !loaded {
			t.reportedN.Add(1)
			now := time.Now()
			c.observer(req.Context(), Event{Kind: event.Alert, Time: now, Start: now, Action: "transport_unmatched",
				Target: origin, Local: t.cfg.strict, Err: errUnmatched})
		}
	}
	if t.cfg.strict {
		return nil, &Error{Class: failure.Unavailable, Err: errUnmatched,
			Message: "request refused: it matches no upstream (WithStrictMatch)"}
	}
	return t.base.RoundTrip(req)
}

// Transport returns an http.RoundTripper that sends requests through base (nil means
// http.DefaultTransport) under the Client's protection; see the Transport type. Hand it to
// an SDK inside an *http.Client:
//
//	hc := &http.Client{Transport: client.Transport(nil)}
//	oai := openai.NewClient(option.WithHTTPClient(hc), option.WithMaxRetries(0))
func (c *Client) Transport(base http.RoundTripper, opts ...TransportOption) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &Transport{
		c:         c,
		base:      base,
		cfg:       transportConfig{maxBody: defaultMaxReplayBody, repeatWindow: defaultRepeatWindow},
		byUp:      make(map[*upstream]*txUpstream),
		seed:      maphash.MakeSeed(),
		recent:    newRecentFailures(recentFailuresMax, recentFailuresTTL),
		deadlines: new([deadlineShards]deadlines),
	}
	for _, o := range opts {
		if o != nil {
			o.applyTransport(&t.cfg)
		}
	}
	t.repeats = newRepeats(t.cfg.repeatWindow)
	for _, up := range c.upstreams {
		d, ok := up.Provider.(Dialect)
		if !ok {
			continue
		}
		tu, ok := newTxUpstream(up, d)
		if !ok {
			continue
		}
		t.ups = append(t.ups, tu)
		t.byUp[up] = tu
	}
	sort.SliceStable(t.ups, func(i, j int) bool { return len(t.ups[i].path) > len(t.ups[j].path) })
	t.chain = t.compatible(c.chain(t.send, t.guard))
	return t
}

// CloseIdleConnections closes the idle connections of the base transport, when it has
// such a method.
func (t *Transport) CloseIdleConnections() {
	if ci, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// txCall is one request through the transport: everything its attempts share.
type txCall struct {
	t     *Transport
	req   *http.Request
	match *txUpstream
	rel   string // path below the matched base URL
	call  APICall
	known bool
	body  *replayBody
	// sdkKey is the caller's own credential, for redaction, once callerKey read it (a
	// committed stream's watcher and its reader may both ask).
	sdkKey     string
	sdkKeyOnce sync.Once

	// Results of the latest attempt, which runs alone.
	resp      *http.Response // the successful attempt's response
	live      *liveBody      // set when resp's body is still being read from the upstream
	ps        ProviderStream // the live body's decoder, for a guarded stream
	actx      context.Context
	cancel    context.CancelCauseFunc // the live body's attempt context
	failed    *http.Response          // the latest attempt's error response, body buffered
	failedNum int                     // the attempt number failed belongs to
	// failedBody is failed's body, as the caller gets it.
	failedBody []byte
	// routeBuf holds a short route (route), in the pooled call that outlives the run.
	routeBuf [4]*upstream
	// A stream's continuation (transport_continue.go): cont is set while its attempt runs,
	// pend holds that attempt's chunks up to its commit point, prefill the request body
	// that sends the partial answer as a prefill (nil: the caller's body).
	cont    bool
	pend    []Chunk
	prefill []byte
	// usage is what the successful one-shot answer reported (readUsage).
	usage Usage
	// hdr is what the latest attempt read of its response's headers (respHeaders.read); zero
	// when it read none.
	hdr respHeaders
	// deadline is the running attempt's entry in the transport's shared timer, of the
	// shard shard (kept while the pooled call is reused).
	deadline deadline
	shard    uint8
}

// RoundTrip sends req under the Client's protection; see the Transport type.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	m, rel := t.match(req.URL, req.Method)
	if m == nil {
		return t.passUnmatched(req)
	}
	caller := req.Context()
	tr := txRuns.Get().(*txRun)
	// One deferred call, open-coded, for the body, the run and the pooled call: last, what
	// follows may still use them; and a panicking hook leaves nothing held.
	defer tr.end()
	body := &tr.body
	if err := readReplayBody(req, t.cfg.maxBody, body); err != nil {
		class := failure.BadRequest
		if err == caller.Err() { // the caller left during the read
			class = classifyCause(err)
		}
		return nil, &Error{Class: class, Upstream: m.up.Name, Message: "reading the request body", Err: err}
	}
	x := &tr.x // zero: pooled calls are cleared on release
	x.t, x.req, x.match, x.rel, x.body = t, req, m, rel, body
	if m.into != nil {
		x.known = m.into.InspectCall(req.Method, x.rel, body.buf, &x.call, tr.msgs[:0], tr.parts[:0])
	} else {
		x.call, x.known = m.d.Inspect(req.Method, x.rel, body.buf)
	}

	count, fromSDK := sdkRetries(req.Header)
	var fp uint64
	var prior *repeat // the failed call this request repeats, for SDKs without a retry header
	callCtx := caller
	if fromSDK {
		fp = t.fingerprint(req, body, x.callerKey())
		if count > 0 {
			return t.answer(m, req, t.sdkRetry(fp, m))
		}
	} else if prior, fp = t.repeatOf(x); prior != nil {
		var ok bool
		if callCtx, ok = t.resume(caller, prior, x); !ok {
			if t.repeats.replay(prior) {
				return t.answerRepeat(caller, prior, x)
			}
			// It answered its share of repeats: this one is a new call.
			t.repeats.forget(fp)
			prior, callCtx = nil, caller
		}
	}

	r := &tr.r
	r.single, r.tx = !body.replayable(), x // from here on, tr.end cleans the run up
	if x.known && t.c.needCost.Load() {
		r.cost = t.cost(&x.call)
	}
	ctx, cancelTotal := callCtx, context.CancelFunc(func() {})
	if x.call.Stream && t.c.cfg.stream.total > 0 {
		ctx, cancelTotal = context.WithTimeoutCause(ctx, t.c.cfg.stream.total, ErrStreamTimeout)
	}
	if err := t.c.begin(ctx, r, &x.call.Request, t.route(x), nil, t.chain, true); err != nil {
		cancelTotal()
		return t.answer(m, req, err)
	}
	// A successful round trip hands no trace to anyone: its first entries stay in the
	// pooled call (copied out below when an error takes them along).
	r.trace = tr.trace[:0:len(tr.trace)]
	a, err := r.exec(ctx)
	if err != nil {
		done := ctx.Err() != nil
		r.releasePartition(nil)
		cancelTotal()
		r.trace = slices.Clone(r.trace) // the error outlives the pooled call
		r.ended(nil, r.final(err), nil)
		return t.failure(done, r, x, err, fromSDK, fp, prior)
	}
	if prior != nil {
		t.repeats.forget(fp)
	}
	return t.succeeded(r, a, x, caller, cancelTotal), nil
}

// succeeded hands the successful attempt's response over: settled at once when its body
// was read whole, else committed to its live body.
func (t *Transport) succeeded(r *run, a *attempt, x *txCall, caller context.Context, cancelTotal context.CancelFunc) *http.Response {
	resp := x.resp
	t.observeLimits(a, x, resp.Header)
	if x.live != nil {
		t.commit(r, a, x, caller, cancelTotal)
		return resp
	}
	cancelTotal()
	usage := a.bill.partial // read from the body (readResponse): the limiter is reconciled with it
	a.settle(failure.None, usage)
	r.cur = nil
	r.releasePartition(usage)
	r.record(a, nil, usage)
	if t.c.observer != nil {
		r.called(&Response{Upstream: a.up.Name, Model: a.call.Model, Status: resp.StatusCode}, nil, nil)
	}
	return resp
}

// txRun is what one transport call needs, in one allocation: recycled when the call
// returns without handing a live body to its caller, which then owns it.
type txRun struct {
	txState
	// The first messages of the request and their one-part contents, when its Dialect
	// writes them into the call's arrays (callInspector), and the run's first trace
	// entries: cleared apart on release, as far as they may have been written.
	msgs  [4]Message
	parts [4]Part
	trace [2]Attempt
}

// txState is what a txRun clears as a whole on release.
type txState struct {
	r    run
	x    txCall
	body replayBody
}

// callInspector is what a Dialect may also offer: Inspect writing into call (zero), with
// arrays for the first messages and their one-part contents that it writes from index 0
// (the pooled call's), so that inspecting a short conversation allocates nothing. It
// reports what Inspect reports, leaving call zero when that is false.
type callInspector interface {
	InspectCall(method, path string, body []byte, call *APICall, msgs []Message, parts []Part) bool
}

var txRuns = sync.Pool{New: func() any {
	tr := new(txRun)
	tr.x.shard = uint8(txShards.Add(1) % deadlineShards)
	return tr
}}

// txShards numbers the pooled calls, which take the shards of the transports' timers in
// turn: the calls of goroutines running at once, each reusing a pooled call of its own,
// mostly take different shards.
var txShards atomic.Uint32

// end closes the caller's body, gives back what the run still holds once it has begun
// (run.cleanup), and recycles tr. Should cleanup panic, tr is left to the garbage
// collector instead of the pool.
func (tr *txRun) end() {
	tr.body.close()
	if tr.r.tx != nil {
		tr.r.cleanup()
	}
	tr.release()
}

// release puts tr back in the pool unless a committed attempt holds it.
func (tr *txRun) release() {
	if tr.r.handedOver {
		return
	}
	reopen := tr.body.reopenFunc // bound to tr.body, which stays where it is
	shard := tr.x.shard
	// The entries of msgs and parts the call may have written: as many as its messages
	// when they are in msgs (a block part holds the one-part content of one of them),
	// else all of them (a read that failed half-way, more messages than msgs holds).
	n := len(tr.msgs)
	if m := tr.x.call.Request.Messages; len(m) > 0 && len(m) <= len(tr.msgs) && &m[0] == &tr.msgs[0] {
		n = len(m)
	}
	for i := range n {
		tr.msgs[i] = Message{} // apart: a tuple assignment zeroes a copy first
		tr.parts[i] = Part{}
	}
	// The trace entries the run may have written: the first, and the second unless the
	// run's trace is still the pooled array with one entry (record only appends to it).
	tr.trace[0] = Attempt{}
	if rt := tr.r.trace; len(rt) != 1 || &rt[0] != &tr.trace[0] {
		tr.trace[1] = Attempt{}
	}
	tr.txState = txState{}
	tr.body.reopenFunc, tr.x.shard = reopen, shard
	txRuns.Put(tr)
}

// commit hands the attempt's live body over to its committed attempt, which settles it.
func (t *Transport) commit(r *run, a *attempt, x *txCall, caller context.Context, cancelTotal context.CancelFunc) {
	lb := x.live
	var cont *txCont
	total := cancelTotal
	if lb.rec.events {
		// A stream the transport continues: its attempts run under one context, canceled
		// when the body is closed.
		ctx, cancel := context.WithCancel(r.ctx)
		cont = &txCont{w: lb.rec.w, link: &streamLink{ctx: ctx, cancel: func() { cancel(); cancelTotal() }}}
		total = func() {}
	}
	cm := t.c.commit(r, a, x.ps, x.actx, x.cancel, caller, total, cont != nil, nil, Usage{})
	lb.cm = cm
	cm.note(&lb.pre)
	if cont != nil {
		cont.link.cm = cm
		lb.cont = cont
		for i := range x.pend {
			cont.acc.add(&x.pend[i])
		}
		x.pend = nil
	}
	if lb.endedEarly {
		cm.finish(io.EOF)
		if cont != nil {
			cm.releaseCall(nil)
			lb.rec.flush()
		}
	}
	lb.dropped = runtime.AddCleanup(lb, abandonBody, droppedBody{cm, lb.raw, cont})
	// The committed attempt keeps the run, and so this call, alive while the upstream is
	// read (its goroutines hold the attempt's context): the call must not hold the body
	// or its response, or a body the caller drops without Close would never become
	// unreachable and its cleanup would never run. Cleared before setBody, after which a
	// read-ahead (and a continuation it starts) may run.
	x.live, x.resp = nil, nil
	cm.setBody(lb) // last: the read-ahead it allows sees every write above (through cm.mu)
}

// droppedBody is what a live body the caller dropped without Close leaves to settle.
type droppedBody struct {
	cm   *committed
	raw  io.Closer
	cont *txCont
}

// abandonBody settles the attempt of a dropped body and closes its upstream body.
func abandonBody(d droppedBody) {
	if d.cont != nil {
		d.cont.link.abandon()
		d.cont.closeRaws()
	} else {
		d.cm.abandon()
	}
	_ = d.raw.Close()
}

// failure answers a request whose attempts all failed; done reports that the call's
// context ended. A failure answered to a request without an SDK retry header is
// remembered for its repeats (prior: the failure it repeats, if any).
func (t *Transport) failure(done bool, r *run, x *txCall, err error, fromSDK bool, fp uint64, prior *repeat) (*http.Response, error) {
	final := r.final(err)
	if done {
		return nil, final
	}
	if n := len(r.trace); x.failed != nil && n > 0 && r.trace[n-1].Number == x.failedNum {
		resp := x.failed
		resp.Header.Set("X-Should-Retry", "false")
		if !fromSDK {
			t.remember(x, fp, prior, final, resp)
		}
		return resp, nil
	}
	if fromSDK {
		t.recent.put(fp, final, time.Now())
	} else {
		t.remember(x, fp, prior, final, nil)
	}
	return t.answer(x.match, x.req, final)
}

// answer returns err as the round trip's answer: a local refusal as the dialect's error
// response (transport_refusal.go), any other error as it is.
func (t *Transport) answer(m *txUpstream, req *http.Request, err error) (*http.Response, error) {
	if resp, ok := t.refusal(m, req, err); ok {
		return resp, nil
	}
	return nil, err
}

// sdkRetry answers an SDK's retry of a request the transport already retried.
func (t *Transport) sdkRetry(fp uint64, m *txUpstream) error {
	if e := t.recent.get(fp, time.Now()); e != nil {
		return e
	}
	return &Error{Class: failure.Unavailable, Upstream: m.up.Name, Err: ErrSDKRetry}
}

// sdkRetries reads the Stainless SDKs' retry counter; fromSDK reports that the header was
// sent (an unreadable or negative value counts as the first try, a count too large for an
// int as a retry).
func sdkRetries(h http.Header) (n int, fromSDK bool) {
	v := headers.Value(h, "X-Stainless-Retry-Count")
	if v == "" {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if errors.Is(err, strconv.ErrRange) && n > 0 {
		return n, true // Atoi's clamp, math.MaxInt: a retry all the same
	}
	if err != nil || n < 0 {
		return 0, true
	}
	return n, true
}

// callerKey returns the credential the caller's request carries (callerCredential), read
// on first use: most calls never redact anything. Safe for concurrent use.
func (x *txCall) callerKey() string {
	x.sdkKeyOnce.Do(x.readCallerKey)
	return x.sdkKey
}

func (x *txCall) readCallerKey() { x.sdkKey = callerCredential(x.req) }

// fingerprint identifies a request across an SDK's retries: method, URL, the caller's
// credential and body.
func (t *Transport) fingerprint(req *http.Request, b *replayBody, key string) uint64 {
	var h maphash.Hash
	h.SetSeed(t.seed)
	h.WriteString(req.Method)
	h.WriteByte(' ')
	h.WriteString(req.URL.String())
	h.WriteByte('\n')
	h.WriteString(key)
	h.WriteByte('\n')
	if b.buf != nil {
		h.Write(b.buf)
	} else {
		h.WriteString(strconv.FormatInt(req.ContentLength, 10))
	}
	return h.Sum64()
}

// cost is the limiter's charge for a recognized call: the Client's estimate of its prompt,
// plus its output bound unless it generates nothing.
func (t *Transport) cost(call *APICall) int {
	lc := &t.c.cfg.limiter
	n := lc.cost(&call.Request) + call.TokenIDs
	if call.NoOutput {
		out := call.Request.MaxTokens
		if out <= 0 {
			out = lc.reservedOutput
		}
		n -= out
	}
	return max(n, 0)
}

// route is the upstreams a call may use. For a recognized shape whose model names a
// model group, or a model the addressed upstream does not serve, it is the model's route
// (the group, in its order) restricted to the upstreams that speak the same shape, each
// reached under its own name for the model; otherwise the upstream the URL names first,
// then the other upstreams of the model's route that speak the same shape.
func (t *Transport) route(x *txCall) []*upstream {
	model := x.call.Request.Model
	if !x.known || model == "" {
		return x.match.self
	}
	full := t.c.route(model)
	_, grouped := (*t.c.groups.Load())[model]
	if _, ok := x.match.up.model(model); grouped || !ok {
		var route []*upstream
		for _, up := range full {
			if t.serves(up, x) {
				if route == nil {
					route = x.routeBuf[:0]
				}
				route = append(route, up)
			}
		}
		if route != nil {
			return route
		}
		return x.match.self
	}
	var route []*upstream
	for _, up := range full {
		if up != x.match.up && t.serves(up, x) {
			if route == nil {
				route = append(x.routeBuf[:0], x.match.up)
			}
			route = append(route, up)
		}
	}
	if route == nil {
		return x.match.self // nowhere else to go: no allocation
	}
	return route
}

// serves reports whether up can take the call x through the transport: the upstream the
// URL names always, another one when it speaks the call's shape and has a model name for
// the call by the rule Complete follows (Client.modelOn: its mapping of the call's model,
// or of a fallback group or budget Reroute group that brought it in), under which the
// attempt renames the model. A call whose model was not read (a body too large to
// buffer) cannot be renamed: only an upstream that takes it under the same name serves.
func (t *Transport) serves(up *upstream, x *txCall) bool {
	if up == x.match.up {
		return true
	}
	tu := t.byUp[up]
	if tu == nil || !x.known {
		return false
	}
	model := x.call.Request.Model
	if m, ok := t.c.modelOn(up, model); !ok || (model == "" && m != "") {
		return false
	}
	shape, ok := tu.shapeOf(x.req.Method, x.rel)
	return ok && shape == x.call.Shape
}

// compatible fails an attempt, without a call, on an upstream that cannot take the call
// (serves: a fallback of another API shape, or one the call's model cannot be renamed for).
func (t *Transport) compatible(next attemptFunc) attemptFunc {
	return func(ctx context.Context, a *attempt) error {
		if !t.serves(a.up, a.tx) {
			return &Error{Class: failure.Unavailable, Upstream: a.up.Name, Model: a.call.Model, Err: ErrNoUpstream,
				Message: "upstream cannot serve this API call through the transport"}
		}
		return next(ctx, a)
	}
}

// observeLimits pulls the key's limiter down to the quota a successful response reported.
func (t *Transport) observeLimits(a *attempt, x *txCall, h http.Header) {
	if a.key == nil {
		return
	}
	if !x.hdr.noQuota() {
		if rl := t.byUp[a.up].d.RateLimits(h); rl != nil {
			a.syncLimits(rl, true)
			return
		}
	}
	a.unreported()
}
