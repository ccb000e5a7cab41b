package llmclient

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient/event"
)

// SDKs that retry without saying so (google.golang.org/genai sends no retry header) are
// recognized by their request: the same method, URL, credential and body again, shortly
// after the transport answered it with a failure. Such a repeat is a retry of the same
// logical call: it gets only the attempts the call has left under the Client's caps, and
// is answered at once, with the same failure, when none are left.
const (
	// defaultRepeatWindow is how soon after a failure the same request counts as its
	// retry: genai's longest default delay between two tries (its MaxDelay, 60s, plus up
	// to 1s of jitter), with margin.
	defaultRepeatWindow = 65 * time.Second
	// maxRepeatWindow bounds WithRepeatWindow.
	maxRepeatWindow = time.Hour
	// repeatsMax bounds the failures remembered per Transport; the oldest go first.
	repeatsMax = 512
	// repeatBodyMax bounds the error body remembered with each failure, to answer a
	// repeat with; a larger one is not kept, and the repeat gets the final *Error.
	repeatBodyMax = 16 << 10
	// maxRepeatReplays bounds how many repeats one failure answers without an upstream
	// call; the next one is sent as a new call.
	maxRepeatReplays = 10
)

// WithRepeatWindow sets how soon after the transport answered a request with a failure
// the same request again (same method, URL, credential and body, and no
// X-Stainless-Retry-Count header) counts as an SDK's retry of it. Such a repeat shares the
// logical call's attempt caps (WithMaxAttempts, WithMaxTotalAttempts, or CallOptions):
// it is sent only to the upstreams with attempts left, with only the attempts left, and
// when none are left it is answered at once with the same failure (the same error
// response, with X-Should-Retry: false, or the same *Error) without an upstream call. So
// an SDK's own retries (google.golang.org/genai's HTTPOptions.RetryOptions, for one) never
// multiply the upstream calls, whatever they are set to. A success forgets the request.
//
// The Transport remembers at most 512 failures, each with at most 16 KiB of error body,
// the oldest dropped first, each for the window after the upstream call that failed:
// repeats answered from memory do not extend it, and one failure answers at most 10
// repeats, after which the next identical request is sent as a new call. A caller that
// repeats an identical request on purpose within the window is treated the same way. d <=
// 0 turns this off; values above 1h are clamped to 1h. Default 65s: genai's longest
// default delay between two tries (60s, plus 1s of jitter), with margin.
func WithRepeatWindow(d time.Duration) TransportOption {
	return transportOptionFunc(func(c *transportConfig) { c.repeatWindow = min(max(d, 0), maxRepeatWindow) })
}

// repeats remembers the failures the transport returned to requests that carried no SDK
// retry header, by request fingerprint. It is bounded in size and age and safe for
// concurrent use; an empty one costs a load per request.
type repeats struct {
	window time.Duration
	n      atomic.Int32 // len(byKey), read without the lock
	mu     sync.Mutex
	byKey  map[uint64]*repeat
	order  []uint64 // insertion order, oldest first, for eviction
}

// repeat is one logical call that failed: what it used of its caps, and its answer.
type repeat struct {
	expires time.Time
	// used counts the upstream calls made per upstream, total across them, over every
	// try so far.
	used  []upstreamUse
	total int
	err   *Error
	// status, header and body are the error response the call was answered with, when
	// it was one that fit; nil header otherwise.
	status int
	header http.Header
	body   []byte
	// replays counts the repeats answered from this failure (repeats.mu).
	replays int
}

type upstreamUse struct {
	name string
	n    int
}

func newRepeats(window time.Duration) *repeats {
	return &repeats{window: window, byKey: make(map[uint64]*repeat)}
}

// active reports whether any failure is remembered.
func (m *repeats) active() bool { return m.window > 0 && m.n.Load() > 0 }

// get returns the failure remembered for key, or nil.
func (m *repeats) get(key uint64, now time.Time) *repeat {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.byKey[key]
	if p == nil || now.After(p.expires) {
		return nil
	}
	return p
}

// put remembers p for key, for the window from now.
func (m *repeats) put(key uint64, p *repeat, now time.Time) {
	p.expires = now.Add(m.window)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.byKey[key]; !ok {
		for len(m.order) >= repeatsMax {
			delete(m.byKey, m.order[0])
			m.order = m.order[1:]
		}
		m.order = append(m.order, key)
	}
	m.byKey[key] = p
	m.n.Store(int32(len(m.byKey)))
}

// replay counts one more repeat answered from p, reporting false, without counting it,
// when p answered its share already.
func (m *repeats) replay(p *repeat) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p.replays >= maxRepeatReplays {
		return false
	}
	p.replays++
	return true
}

// forget drops key: the request succeeded.
func (m *repeats) forget(key uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.byKey[key]; !ok {
		return
	}
	delete(m.byKey, key)
	if i := slices.Index(m.order, key); i >= 0 {
		m.order = slices.Delete(m.order, i, i+1)
	}
	m.n.Store(int32(len(m.byKey)))
}

// repeatOf returns the failure that the request x repeats, with its fingerprint; nil
// when there is none (or detection is off).
func (t *Transport) repeatOf(x *txCall) (*repeat, uint64) {
	if !t.repeats.active() || !x.body.buffered() {
		return nil, 0
	}
	fp := t.fingerprint(x.req, x.body, x.callerKey())
	return t.repeats.get(fp, time.Now()), fp
}

// resume returns the context a repeat of p runs under: the caller's call options with
// the caps the logical call has left, and the upstreams whose attempts are used up
// excluded. ok is false when nothing is left: the repeat is answered with p's failure.
func (t *Transport) resume(ctx context.Context, p *repeat, x *txCall) (context.Context, bool) {
	var o CallOptions
	if co := callOptions(ctx); co != nil {
		o = *co
	}
	perUp, total := t.c.cfg.retry.maxAttempts, t.c.cfg.retry.maxTotal
	if o.MaxAttempts > 0 {
		perUp = o.MaxAttempts
	}
	if o.MaxTotalAttempts > 0 {
		total = o.MaxTotalAttempts
	}
	if p.total >= total {
		return ctx, false
	}
	exclude := slices.Clone(o.Exclude)
	most, open := 0, false
	for _, up := range t.route(x) {
		n := p.usedOn(up.Name)
		if n >= perUp {
			exclude = append(exclude, up.Name)
			continue
		}
		if !slices.Contains(o.Exclude, up.Name) {
			open = true
		}
		most = max(most, n)
	}
	if !open {
		return ctx, false
	}
	o.MaxAttempts, o.MaxTotalAttempts, o.Exclude = perUp-most, total-p.total, exclude
	return WithCallOptions(ctx, o), true
}

// buffered reports whether the body is held whole (or absent), so that a fingerprint
// covers it; a body too large to buffer has none and is never taken for a repeat.
func (b *replayBody) buffered() bool { return b.get == nil && b.once == nil }

func (p *repeat) usedOn(name string) int {
	for _, u := range p.used {
		if u.name == name {
			return u.n
		}
	}
	return 0
}

// answerRepeat answers a repeat of p that has nothing left, without an upstream call:
// p's error response again, or a copy of its error without its attempts, its cause
// joined with ErrSDKRetry. The observer hears of the call (event.Call, no attempts).
func (t *Transport) answerRepeat(ctx context.Context, p *repeat, x *txCall) (*http.Response, error) {
	now := time.Now()
	resp, err := p.answer(x.req)
	if c := t.c; c.observer != nil {
		ev := Event{Kind: event.Call, CallID: callIDs.Add(1), Time: now, Start: now, Model: x.call.Request.Model,
			Partition: c.cfg.limiter.partitionOf(ctx, &x.call.Request), Class: p.err.Class, Upstream: p.err.Upstream,
			Status: p.err.Status, Err: p.err}
		if err != nil {
			ev.Err = err
		}
		c.observer(ctx, ev)
	}
	if err != nil {
		if resp, ok := t.refusal(x.match, x.req, p.err); ok {
			return resp, nil // the refusal's answer again
		}
	}
	return resp, err
}

// answer is p's error response again, or its error.
func (p *repeat) answer(req *http.Request) (*http.Response, error) {
	if p.header == nil {
		cp := *p.err
		cp.Attempts, cp.Err = nil, errors.Join(ErrSDKRetry, p.err.Err)
		return nil, &cp
	}
	h := p.header.Clone()
	h.Set("X-Should-Retry", "false")
	h.Set("Content-Length", strconv.Itoa(len(p.body)))
	return &http.Response{Status: strconv.Itoa(p.status) + " " + http.StatusText(p.status), StatusCode: p.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h, ContentLength: int64(len(p.body)),
		Body: io.NopCloser(bytes.NewReader(p.body)), Request: req, Uncompressed: true}, nil
}

// remember records the failed call that answered x with final (and resp, when it is an
// error response), adding its upstream calls to those of the try it repeats, if any.
func (t *Transport) remember(x *txCall, fp uint64, prior *repeat, final *Error, resp *http.Response) {
	if t.repeats.window <= 0 || !x.body.buffered() {
		return
	}
	if prior == nil {
		fp = t.fingerprint(x.req, x.body, x.callerKey())
	}
	p := &repeat{err: final}
	if prior != nil {
		p.used, p.total = slices.Clone(prior.used), prior.total
	}
	for _, at := range final.Attempts {
		if at.Local {
			continue
		}
		p.total++
		if i := slices.IndexFunc(p.used, func(u upstreamUse) bool { return u.name == at.Upstream }); i >= 0 {
			p.used[i].n++
		} else {
			p.used = append(p.used, upstreamUse{name: at.Upstream, n: 1})
		}
	}
	if resp != nil && len(x.failedBody) <= repeatBodyMax {
		p.status, p.header, p.body = resp.StatusCode, resp.Header.Clone(), bytes.Clone(x.failedBody)
		if p.body == nil {
			p.body = []byte{}
		}
	}
	t.repeats.put(fp, p, time.Now())
}
