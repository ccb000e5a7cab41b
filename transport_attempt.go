package llmclient

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/internal/headers"

	"github.com/llmclient/llmclient/internal/httpx"
)

// maxStreamPrefix bounds the bytes of a stream kept before its first content event, for
// replay to the caller. A stream that sends more than this without content (endless
// keep-alives) is handed over at that point: from then on a failure is the caller's
// interruption, as after a first token, and memory stays bounded.
const maxStreamPrefix = 1 << 20

// defaultTransportAttemptTimeout bounds a one-shot transport attempt when neither the
// upstream nor WithAttemptTimeout does: the caller's base transport (http.DefaultTransport
// has no response-header timeout) may otherwise wait for ever on a hung upstream.
const defaultTransportAttemptTimeout = 10 * time.Minute

// guard bounds one attempt: a streaming call by the first-token timeout, a one-shot call
// by the upstream's attempt timeout. The attempt's context outlives the layer when the
// response body is still being read from the upstream; the committed attempt then owns
// its cancel.
func (t *Transport) guard(next attemptFunc) attemptFunc {
	return func(ctx context.Context, a *attempt) error {
		x := a.tx
		limit, cause := a.timeout(), ErrAttemptTimeout
		if limit <= 0 {
			limit = defaultTransportAttemptTimeout
		}
		if x.call.Stream {
			limit, cause = t.c.cfg.stream.firstToken, ErrFirstTokenTimeout
		}
		// One clock reading for the time left and the deadline.
		now := time.Now()
		limit = a.limitAt(ctx, limit, now)
		actx, cancel := context.WithCancelCause(ctx)
		var timer *time.Timer
		var dl *deadline // the attempt's entry in the transport's shared timer
		if limit > 0 {
			if usesShared(now) {
				dl = &x.deadline
				dl.at, dl.cancel, dl.cause = now.Add(limit), cancel, cause
				ds := &t.deadlines[x.shard%deadlineShards]
				ds.add(dl)
				defer func() {
					if dl != nil { // a panic below: the entry must not outlive the pooled call
						ds.remove(dl)
					}
				}()
			} else {
				timer = time.AfterFunc(limit, func() { cancel(cause) })
			}
		}
		err := next(actx, a)
		fired := timer != nil && !timer.Stop()
		if dl != nil {
			fired = t.deadlines[x.shard%deadlineShards].remove(dl)
			dl = nil
		}
		if err == nil && fired && x.live != nil {
			// The timer fired as the attempt succeeded: its context, and so its body, is gone.
			x.live.abort(x.ps)
			x.live, x.resp, x.ps = nil, nil, nil
			err = &Error{Class: failure.Timeout, Upstream: a.up.Name, Model: a.call.Model, Err: cause}
		}
		if err != nil {
			if errors.Is(context.Cause(actx), cause) && ctx.Err() == nil {
				e := err.(*Error)
				e.Class, e.Err = failure.Timeout, cause
			}
			cancel(context.Canceled)
			return err
		}
		if x.live != nil {
			x.actx, x.cancel = actx, cancel
		} else {
			cancel(context.Canceled)
		}
		return nil
	}
}

// send is the innermost step of a transport attempt: one HTTP round trip to the attempt's
// upstream, its error response classified by the upstream's Dialect, its stream read up
// to the first content event.
func (t *Transport) send(ctx context.Context, a *attempt) error {
	x := a.tx
	x.resp, x.live, x.ps, x.pend, x.hdr = nil, nil, nil, x.pend[:0], respHeaders{}
	tu := x.match // the upstream the URL names, without a map lookup
	if a.up != tu.up {
		tu = t.byUp[a.up]
	}
	out := t.outgoing(ctx, a, tu)
	if x.prefill != nil {
		t.sendPrefill(out, x, a)
		return t.received(a, tu, out)
	}
	body, size, err := x.body.open()
	if err != nil {
		return &Error{Class: failure.BadRequest, Message: "reopening the request body", Err: err}
	}
	out.Body, out.ContentLength, out.GetBody = body, size, x.body.getBody()
	if body == nil {
		out.Body = nil
	}
	if x.known && a.call.Model != x.call.Request.Model && a.call.Model != "" {
		renameAttempt(out, x, a.call.Model)
	}
	return t.received(a, tu, out)
}

// received sends out and reads its response.
func (t *Transport) received(a *attempt, tu *txUpstream, out *http.Request) error {
	x := a.tx
	resp, err := t.base.RoundTrip(out)
	if err != nil {
		if errors.Is(err, io.EOF) {
			// The connection closed before the response: a network failure, retried.
			return &Error{Class: failure.Network, Err: err}
		}
		return err
	}
	a.status = resp.StatusCode
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// An upgrade (a WebSocket): the body is the connection, the caller's from now on.
		resp.Request = x.req
		x.resp = resp
		return nil
	}
	if resp.StatusCode >= 400 {
		return t.errorResponse(a, tu, resp)
	}
	if tu != x.match && followed(resp) {
		// The caller's client would follow it with the caller's headers, credentials and
		// all, to the target's host or further: this upstream cannot serve the call.
		httpx.DrainClose(resp.Body)
		return &Error{Class: failure.Unavailable, Status: resp.StatusCode, Err: ErrNoUpstream,
			Message: "failover target answered with a redirect"}
	}
	x.hdr.read(resp.Header, tu.quota)
	if isEventStream(x.hdr.contentType(resp.Header)) {
		if x.known && !x.call.Stream && x.body.unread() {
			// A body too large to buffer was not read for its stream flag: the answer
			// says it is a stream, and the Dialect decodes it, cut and stall included.
			x.call.Stream = true
		}
		if x.known && x.call.Stream {
			return t.openStream(a, tu, resp)
		}
		x.live = newLiveBody(resp.Body, nil, false)
		x.resp = handOver(resp, x.req, x.live)
		return nil
	}
	return t.readResponse(a, tu, resp)
}

// sendPrefill makes out carry the prefill body of a stream's continuation, under the
// attempt's name for the model.
func (t *Transport) sendPrefill(out *http.Request, x *txCall, a *attempt) {
	data := x.prefill
	if x.known && a.call.Model != x.call.Request.Model && a.call.Model != "" {
		if d, ok := renameModel(data, a.call.Model); ok {
			data = d
		}
	}
	out.Body, out.ContentLength = newBufferedBody(data), int64(len(data))
	out.GetBody = func() (io.ReadCloser, error) { return newBufferedBody(data), nil }
}

// continues reports whether a stream of x is continued after a break
// (WithStreamContinuation): a shape whose events the transport can write, and a body it
// can send again.
func (t *Transport) continues(x *txCall) bool {
	sc := &t.c.cfg.stream
	return sc.continuation && sc.accumulate && continuable(x.call.Shape) && x.body.replayable() && x.body.buf != nil
}

// followed reports whether an http.Client follows resp: a redirect with a Location.
func followed(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect,
		http.StatusPermanentRedirect:
		return headers.Value(resp.Header, "Location") != ""
	}
	return false
}

// outgoing builds the attempt's request from the caller's, which it never modifies. On
// the caller's own upstream the caller's headers go out as they are, with a pool key in
// place of its credential. On another upstream the URL, and the Host, are the target's,
// the target's Dialect sets its credential and configured headers, and every credential
// of the caller's stays behind when the host changes or the target has a credential of
// its own (a pool key, its provider's key): on the same host, another upstream may be
// another account (two deployments of an API gateway), which the caller's other
// credential headers (an X-Api-Key, a gateway's token) are not for. Only an upstream on
// the caller's host without a credential of its own gets the caller's. a.secret() then
// returns the credential that went out, for redaction.
func (t *Transport) outgoing(ctx context.Context, a *attempt, tu *txUpstream) *http.Request {
	x := a.tx
	// A shallow copy: its URL and headers are the caller's until they must change, and
	// then they are replaced, never modified in place.
	out := x.req.WithContext(ctx)
	if tu != x.match {
		out.URL = target(x.req.URL, x.rel, x.match, tu)
		out.Host = ""
		out.Header = x.req.Header.Clone()
		if tu.key != x.match.key || tu.d.Authorize(http.Header{}, a.call.APIKey) != "" {
			stripCredentials(out)
		}
	}
	if len(a.call.Headers) > 0 {
		if tu == x.match {
			out.Header = x.req.Header.Clone()
		}
		for k, v := range a.call.Headers {
			out.Header[http.CanonicalHeaderKey(k)] = v
		}
	}
	if a.call.APIKey != "" || tu != x.match {
		if tu == x.match && len(a.call.Headers) == 0 {
			out.Header = x.req.Header.Clone()
		}
		a.call.APIKey = tu.d.Authorize(out.Header, a.call.APIKey)
		if a.call.APIKey != "" && out.URL.RawQuery != "" && queryCredential(out.URL.RawQuery) {
			// The key set replaces one the caller put in the URL (Gemini's ?key=).
			if out.URL == x.req.URL {
				u := *out.URL
				out.URL = &u
			}
			stripQueryCredentials(out.URL)
		}
		a.callerKey = false
	} else {
		a.callerKey = true // the caller's key goes out: redact it like a pool key (secret)
	}
	return out
}

// secret is the credential the attempt sent, to redact: its pool or upstream key, or the
// caller's own when that went out (read from the caller's request only now).
func (a *attempt) secret() string {
	if a.callerKey { // set by outgoing only, where no other key went out
		return a.tx.callerKey()
	}
	return a.call.APIKey
}

// stripCredentials removes from a request whatever may carry the caller's credentials:
// authorization and cookie headers, every header whose name speaks of a key, token,
// secret, session, signature or auth, and credential query parameters.
func stripCredentials(req *http.Request) {
	for name := range req.Header {
		if credentialHeader(name) {
			req.Header.Del(name)
		}
	}
	if req.URL.RawQuery != "" {
		stripQueryCredentials(req.URL)
	}
}

// stripQueryCredentials removes the credential parameters from u's query.
func stripQueryCredentials(u *url.URL) {
	q := u.Query()
	for name := range q {
		if credentialParam(name) {
			q.Del(name)
		}
	}
	u.RawQuery = q.Encode()
}

// credentialParam reports whether a query parameter carries a credential.
func credentialParam(name string) bool {
	switch strings.ToLower(name) {
	case "key", "api_key", "apikey", "api-key", "access_token", "token", "auth", "sig", "signature":
		return true
	}
	return false
}

// queryCredential reports whether a raw query has a credential parameter.
func queryCredential(rawQuery string) bool {
	for rawQuery != "" {
		var kv string
		kv, rawQuery, _ = strings.Cut(rawQuery, "&")
		name, _, _ := strings.Cut(kv, "=")
		if n, err := url.QueryUnescape(name); err == nil && credentialParam(n) || credentialParam(name) {
			return true
		}
	}
	return false
}

// credentialHeader reports whether a header may carry a credential.
func credentialHeader(name string) bool {
	n := strings.ToLower(name)
	if n == "cookie" {
		return true
	}
	for _, w := range [...]string{"auth", "key", "token", "secret", "session", "signature", "credential", "password"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// errorResponse reads, closes and classifies an error response, keeping a replayable copy
// for the caller in case it is the last one.
func (t *Transport) errorResponse(a *attempt, tu *txUpstream, resp *http.Response) error {
	x := a.tx
	data, decoded, rerr := readErrorBody(resp)
	httpx.DrainClose(resp.Body)
	e := tu.d.ClassifyError(resp.StatusCode, resp.Header, data)
	if e == nil {
		e = &Error{Class: failure.Unknown, Status: resp.StatusCode}
	}
	if e.Status == 0 {
		e.Status = resp.StatusCode
	}
	if rerr != nil && !errors.Is(rerr, httpx.ErrTooLarge) {
		e.Err = rerr
	}
	x.keep(a, resp, data, decoded)
	return e
}

// keep stores a failed attempt's response as the answer to the caller should the call
// end with it: its body replaced by data (decoded when it was compressed), the attempt's
// key redacted from the body and from every header.
func (x *txCall) keep(a *attempt, resp *http.Response, data []byte, decoded bool) {
	key := a.secret()
	if key != "" && len(data) > 0 {
		if r := redactString(string(data), key); len(r) != len(data) || r != string(data) {
			data = []byte(r)
		}
	}
	cp := *resp
	cp.Header = resp.Header.Clone()
	if key != "" {
		for name, vs := range cp.Header {
			for i, v := range vs {
				vs[i] = redactString(v, key)
			}
			cp.Header[name] = vs
		}
	}
	if decoded || resp.Uncompressed {
		cp.Header.Del("Content-Encoding")
		cp.Uncompressed = true
	}
	cp.Header.Set("Content-Length", strconv.Itoa(len(data)))
	cp.ContentLength = int64(len(data))
	cp.TransferEncoding = nil
	cp.Body = io.NopCloser(bytes.NewReader(data))
	cp.Request = x.req
	x.failed, x.failedNum, x.failedBody = &cp, a.number, data
}

// readResponse reads a one-shot response whole, up to the replay limit, so that the
// attempt is settled, and a body cut short is retried, before the caller sees it. A larger
// body is handed over with its remainder still on the wire.
func (t *Transport) readResponse(a *attempt, tu *txUpstream, resp *http.Response) error {
	x := a.tx
	limit := t.cfg.maxBody
	data, held, err := readUpTo(resp.Body, resp.ContentLength, limit)
	if err != nil {
		httpx.DrainClose(resp.Body)
		return err
	}
	if int64(len(data)) > limit {
		x.live = newLiveBody(resp.Body, &recorder{r: resp.Body, buf: data}, false)
		x.resp = handOver(resp, x.req, x.live)
		return nil
	}
	resp.Request = x.req
	_ = resp.Body.Close()
	if x.known && inBandError(data) {
		// An error object under a success status, as OpenAI-compatible proxies send.
		if e := tu.d.ClassifyError(resp.StatusCode, resp.Header, data); e != nil && e.Class != failure.None && e.Class != failure.Unknown {
			if e.Status == 0 {
				e.Status = resp.StatusCode
			}
			x.keep(a, resp, data, false)
			return e
		}
	}
	if t.c.cost != nil || a.r.cost > 0 {
		// What the body says the attempt used (cost.go): its price, and the limiters'
		// token charges reconciled as for Complete. A call with no token estimate (no
		// token limit, price or budget: Client.needCost) charged no tokens to reconcile.
		x.readUsage(a, tu, decodedUsageBody(resp, x.hdr.contentEncoding(resp.Header), data, limit))
	}
	if held == nil {
		held = new(bufferedBody)
	}
	held.Reset(data)
	resp.Body = held
	resp.ContentLength = int64(len(data))
	x.resp = resp
	return nil
}

// readUsage keeps the usage and model of a one-shot response read whole, when the
// upstream's dialect reads them (UsageReader): the attempt is then priced, and its limiter
// charge reconciled, from them rather than from the Client's estimate. The usage is kept
// in the call, which the attempt's settlement outlives, so that reading it allocates
// nothing.
func (x *txCall) readUsage(a *attempt, tu *txUpstream, body []byte) {
	if tu.ur == nil || !x.known {
		return
	}
	var u Usage
	var model string
	var ok bool
	if tu.tokens != nil && x.t.c.cost == nil {
		u, ok = tu.tokens.ReadTokenUsage(x.call.Shape, body) // no price kept: the model's name is not needed
	} else {
		u, model, ok = tu.ur.ReadUsage(x.call.Shape, body)
	}
	if !ok || !usageReported(&u) {
		return // priced and reconciled as a call without usage
	}
	x.usage = u
	a.bill.partial = &x.usage
	if model != "" {
		a.bill.model = model
	}
}

// tokenUsageReader is what a Dialect's UsageReader may also offer: the usage of a
// one-shot body without the model's name, which only pricing needs. ReadTokenUsage must
// return the usage and ok ReadUsage returns for the same body. provider/openai offers it.
type tokenUsageReader interface {
	ReadTokenUsage(shape dialect.Shape, body []byte) (Usage, bool)
}

// inBandError reports whether a one-shot body is an error object: a JSON object whose
// first member is "error" holding an object or a string, or "type" or "object" holding
// "error" (Anthropic's and vLLM's shapes). It looks at the first bytes only.
func inBandError(data []byte) bool {
	i := skipJSONSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = skipJSONSpace(data, i+1)
	if i+1 >= len(data) || data[i] != '"' || data[i+1] != 'e' && data[i+1] != 't' && data[i+1] != 'o' {
		return false // the common case ({"id": …}), at once
	}
	var n int
	value := false // the member must hold the string "error"
	switch rest := data[i:]; {
	case len(rest) >= 7 && string(rest[:7]) == `"error"`:
		n = 7
	case len(rest) >= 6 && string(rest[:6]) == `"type"`:
		n, value = 6, true
	case len(rest) >= 8 && string(rest[:8]) == `"object"`:
		n, value = 8, true
	default:
		return false
	}
	i = skipJSONSpace(data, i+n)
	if i >= len(data) || data[i] != ':' {
		return false
	}
	i = skipJSONSpace(data, i+1)
	if value {
		return len(data)-i >= 7 && string(data[i:i+7]) == `"error"`
	}
	return i < len(data) && (data[i] == '{' || data[i] == '"')
}

// skipJSONSpace returns the index of the first byte at or after i that is not JSON white
// space.
func skipJSONSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// bufferedBody is a body read whole: a reader that closes, in one allocation with the
// bytes.Reader inside it.
type bufferedBody struct{ bytes.Reader }

func newBufferedBody(data []byte) *bufferedBody {
	b := new(bufferedBody)
	b.Reset(data)
	return b
}

func (*bufferedBody) Close() error { return nil }

// openStream reads a streaming response up to its first content event. Failures before it
// are the attempt's failures; at it, the response is committed and handed over with the
// events read so far replayed in front of the rest.
func (t *Transport) openStream(a *attempt, tu *txUpstream, resp *http.Response) error {
	x := a.tx
	rec := &recorder{r: resp.Body}
	view := *resp
	view.Body = rec
	var decoded *tailReader
	if !resp.Uncompressed && x.hdr.contentEncoding(resp.Header) != "" {
		// The caller asked for an encoding and gets the bytes as they came; the guard
		// reads them decoded.
		var err error
		if decoded, err = decodeView(&view, rec); err != nil {
			_ = resp.Body.Close()
			return err
		}
	}
	switch {
	case decoded != nil:
		// The caller gets the compressed bytes: they cannot be cut at an event's end, and
		// the stream is not continued.
	case x.cont:
		rec.events = true // its chunks are re-encoded (txCont): its bytes are never delivered
	case t.continues(x):
		rec.events, rec.w = true, newEventWriter(x.call.Shape)
	}
	ps := tu.d.NewStream(x.call.Shape, &view)
	lb := newLiveBody(resp.Body, rec, true)
	if decoded != nil {
		lb.ends = &decoded.eventTail
	}
	for {
		ch, err := ps.Recv()
		if err == nil {
			notePre(&lb.pre, &ch)
			if rec.events && !ch.KeepAlive {
				x.pend = append(x.pend, ch)
			}
			if !ch.HasContent() && len(rec.buf) <= maxStreamPrefix {
				continue
			}
			a.ttft = time.Since(a.sent) // committed at the first content event
		} else if err == io.EOF {
			// An answer without content: the caller sees it whole.
			lb.decoding, lb.endedEarly = false, true
		} else {
			_ = ps.Close()
			_ = resp.Body.Close()
			var e *Error
			if errors.As(err, &e) && len(rec.buf) <= maxStreamPrefix {
				// An in-band error event: should it end the call, the caller reads it.
				x.keep(a, resp, rec.buf, false)
			}
			return err
		}
		x.resp, x.live, x.ps = handOver(resp, x.req, lb), lb, ps
		return nil
	}
}

// handOver returns the response the caller gets for a live body: a copy of the base
// transport's, so that what the base transport keeps while the body is open (net/http's
// connection loop holds its response until the body ends) never holds the live body,
// whose cleanup must run once the caller drops it.
func handOver(resp *http.Response, req *http.Request, lb *liveBody) *http.Response {
	out := new(http.Response)
	*out = *resp
	out.Request, out.Body = req, lb
	return out
}

// notePre folds what a chunk before the commit point says into the body's summary.
func notePre(pre, ch *Chunk) {
	if ch.Usage != nil {
		u := *ch.Usage
		pre.Usage = &u
	}
	if ch.FinishReason != finish.None {
		pre.FinishReason = ch.FinishReason
	}
	pre.Text += ch.Text
}

// respHeaders is what the transport reads of a successful response's headers (read): its
// Content-Type and Content-Encoding and, when the Dialect tells its quota headers apart
// (quotaHeaders), whether any is there. A small map, as self-hosted servers send, is read
// in one walk, which costs less than a lookup per name and spares the Dialect's
// RateLimits its own walk when no quota header is there; a larger one is read by a lookup
// per name when it is needed.
type respHeaders struct {
	walked bool   // the fields below hold what the map has
	ct, ce string // Content-Type, Content-Encoding
	// quota: a header the Dialect's RateLimits reads is there.
	quota bool
}

// smallHeaders is the most keys a response's header map has for read to walk it: a
// map of up to 8 keys is one group of slots, cheap to walk, and the big vendors, which
// send quota headers, send more than that.
const smallHeaders = 8

// read reads h in one walk when it is small and the Dialect tells its quota headers
// apart (q non-nil); otherwise the fields are looked up when asked for. rh is zero.
func (rh *respHeaders) read(h http.Header, q quotaHeaders) {
	if q == nil || len(h) > smallHeaders {
		return
	}
	rh.walked = true
	for k, vs := range h {
		if len(vs) == 0 {
			continue // headers.Value's "" too
		}
		switch k {
		case "Content-Type":
			rh.ct = vs[0]
		case "Content-Encoding":
			rh.ce = vs[0]
		default:
			if !rh.quota && q.RateLimitHeader(k) {
				rh.quota = true
			}
		}
	}
}

// contentType returns the response's Content-Type; h is its header map.
func (rh *respHeaders) contentType(h http.Header) string {
	if rh.walked {
		return rh.ct
	}
	return headers.Value(h, "Content-Type")
}

// contentEncoding returns the response's Content-Encoding; h is its header map.
func (rh *respHeaders) contentEncoding(h http.Header) string {
	if rh.walked {
		return rh.ce
	}
	return headers.Value(h, "Content-Encoding")
}

// noQuota reports that the response was walked and holds none of the Dialect's quota
// headers: its RateLimits would return nil.
func (rh *respHeaders) noQuota() bool { return rh.walked && !rh.quota }

// quotaHeaders is what a Dialect may also offer: RateLimitHeader reports whether its
// RateLimits reads the header name (canonical), so that RateLimits returns nil for a
// header map with none of them. provider/openai offers it.
type quotaHeaders interface {
	RateLimitHeader(name string) bool
}

// isEventStream reports whether a response with the Content-Type ct is a server-sent event
// stream.
func isEventStream(ct string) bool {
	for len(ct) > 0 && (ct[0] == ' ' || ct[0] == '\t') { // strings.TrimLeft, without its cutset
		ct = ct[1:]
	}
	const es = "text/event-stream"
	if len(ct) < len(es) || !strings.EqualFold(ct[:len(es)], es) {
		return false // another media type, decided without ParseMediaType's allocations
	}
	if len(ct) == len(es) || ct[len(es)] == ';' || ct[len(es)] == ' ' {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == es
}
