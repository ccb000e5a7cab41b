package cache

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient"
)

// Cache is the exact response cache, with optional in-flight de-duplication and
// idempotency keys. Create one with New and add its Middleware to a Client:
//
//	store, _ := cache.NewMemory(cache.MemoryConfig{})
//	c, _ := cache.New(store, cache.WithPartition(cache.PartitionByMetadata("tenant")))
//	client, _ := llmclient.New(llmclient.WithMiddleware(c.Middleware()), ...)
//
// A Cache is safe for concurrent use; one Cache may serve several Clients.
type Cache struct {
	store   Store
	local   bool // the store never blocks: no timeout context per call
	cfg     config
	flights flightGroup
	writes  pending // stores of answers under way, off their callers' paths
	stats   counters
}

// counters are the cache's own statistics.
type counters struct {
	hits, misses, bypasses, stored, notStored, shared, replays, storeErrors atomic.Uint64
}

// New returns a Cache over store, configured by opts. It validates every option and
// reports all problems in one error.
func New(store Store, opts ...Option) (*Cache, error) {
	if store == nil {
		return nil, errors.New("llmclient/cache: nil store")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	_, local := store.(interface{ neverBlocks() })
	return &Cache{store: store, cfg: cfg, local: local}, nil
}

// Middleware returns the middleware that serves calls from the cache. Add it with
// llmclient.WithMiddleware; added first, it runs outside every layer and other
// middleware.
func (c *Cache) Middleware() llmclient.Middleware {
	return func(next llmclient.Handler) llmclient.Handler { return handler{c: c, next: next} }
}

type handler struct {
	c    *Cache
	next llmclient.Handler
}

// call is what the cache works out once per call.
type call struct {
	ctl       Control
	partition string
	key       string // exact key; "" when neither caching nor de-duplication needs it
	idemKey   string // store key of the idempotency key; "" without one
	fp        string // the request's fingerprint, with an idempotency key
	exact     bool   // look up and store in the exact cache
}

func (c *Cache) prepare(ctx context.Context, req *llmclient.Request) call {
	cl := call{ctl: ControlFrom(ctx), partition: c.cfg.partition(ctx, req)}
	cl.exact = c.cfg.ttl > 0 && !cl.ctl.NoStore
	idem := IdempotencyKeyFrom(ctx)
	if idem != "" && c.cfg.idemTTL > 0 {
		cl.idemKey = c.idempotencyStoreKey(cl.partition, idem)
	}
	if cl.exact || c.cfg.dedup || cl.idemKey != "" {
		cl.key = key('x', c.cfg.namespace, cl.partition, req, c.cfg.metadataKeys)
	}
	if cl.idemKey != "" {
		cl.fp = fingerprint(req, c.cfg.metadataKeys)
	}
	return cl
}

// idempotencyStoreKey keys an idempotency key within its namespace and partition.
func (c *Cache) idempotencyStoreKey(partition, key string) string {
	w := getWriter()
	w.uint(idempotencyKeyVersion)
	w.str("idempotency")
	w.str(c.cfg.namespace)
	w.str(partition)
	w.str(key)
	s := w.hexSum('i')
	putWriter(w)
	return s
}

func (c *Cache) event(ctx context.Context, cl *call, req *llmclient.Request, stream bool, e Event) {
	if c.cfg.observer == nil {
		return
	}
	e.Partition, e.Model, e.Stream = cl.partition, req.Model, stream
	c.cfg.observer(ctx, e)
}

// lookup returns the entry that may answer the call: the first answer under its
// idempotency key, else an exact hit. A repeated idempotency key with another request is
// an error; a record that cannot be compared with the request (written by a build that
// fingerprints requests otherwise) is no answer.
func (c *Cache) lookup(ctx context.Context, cl *call, req *llmclient.Request, stream bool) (*Entry, error) {
	if cl.idemKey != "" && !cl.ctl.NoStore {
		if e := c.get(ctx, cl, req, stream, cl.idemKey); e != nil {
			switch matchFingerprint(e.Fingerprint, cl.fp, cl.key) {
			case sameRequest:
				c.stats.replays.Add(1)
				c.event(ctx, cl, req, stream, Event{Kind: EventReplay, Age: time.Since(e.Created)})
				return e, nil
			case otherRequest:
				return nil, mismatch()
			}
		}
	}
	if c.cfg.ttl == 0 {
		return nil, nil
	}
	if !cl.ctl.lookup() { // NoStore included
		c.stats.bypasses.Add(1)
		c.event(ctx, cl, req, stream, Event{Kind: EventBypass})
		return nil, nil
	}
	e := c.get(ctx, cl, req, stream, cl.key)
	now := time.Now()
	if e != nil && cl.ctl.accepts(e.Created, now) {
		c.stats.hits.Add(1)
		c.event(ctx, cl, req, stream, Event{Kind: EventHit, Age: now.Sub(e.Created)})
		return e, nil
	}
	c.stats.misses.Add(1)
	c.event(ctx, cl, req, stream, Event{Kind: EventMiss})
	return nil, nil
}

// get reads key from the store under the store timeout; a failure is a miss.
func (c *Cache) get(ctx context.Context, cl *call, req *llmclient.Request, stream bool, key string) *Entry {
	sctx, cancel := c.storeContext(ctx, false)
	e, err := c.store.Get(sctx, key)
	cancel()
	if err != nil {
		c.stats.storeErrors.Add(1)
		c.event(ctx, cl, req, stream, Event{Kind: EventStoreError, Err: err})
		return nil
	}
	return e
}

// storeContext bounds one store call. A store after the answer runs detached from the
// caller's cancellation, the answer having arrived and being worth keeping, but only
// under the store timeout: without one, the caller's context is its only bound (and the
// store is made before the call returns; see save).
func (c *Cache) storeContext(ctx context.Context, detach bool) (context.Context, context.CancelFunc) {
	if c.local || c.cfg.storeTimeout == 0 {
		return ctx, func() {}
	}
	if detach {
		ctx = context.WithoutCancel(ctx)
	}
	return context.WithTimeout(ctx, c.cfg.storeTimeout)
}

// save stores an answer in the exact cache and under its idempotency key, as the call
// asks; an answer that must not be kept is reported and dropped. It does not wait for a
// store that may block: the answer is written on a goroutine of its own, under the store
// timeout, detached from the caller's cancellation. It writes before it returns to a
// store that never blocks, and without a store timeout (under the caller's context).
func (c *Cache) save(ctx context.Context, cl *call, req *llmclient.Request, stream bool, resp *llmclient.Response, chunks []llmclient.Chunk, why error) {
	e := c.entry(ctx, cl, req, stream, resp, chunks, why)
	switch {
	case e == nil:
	case c.local || c.cfg.storeTimeout == 0:
		c.write(ctx, cl, req, stream, e)
	default:
		c.writes.add()
		go func() {
			defer c.writes.done()
			c.writeBehind(context.WithoutCancel(ctx), cl, req, stream, e)
		}()
	}
}

// entry returns the entry to store for an answer, or nil when the call stores nothing;
// an answer that must not be kept is reported.
func (c *Cache) entry(ctx context.Context, cl *call, req *llmclient.Request, stream bool, resp *llmclient.Response, chunks []llmclient.Chunk, why error) *Entry {
	if !cl.exact && (cl.idemKey == "" || cl.ctl.NoStore) {
		return nil
	}
	if why == nil && !storable(resp) {
		why = ErrNotStorable
	}
	var e *Entry
	if why == nil {
		e = newEntry(resp, chunks, time.Now())
		e.Fingerprint = cl.fp
		// A stream's whole entry, not its chunks alone (the recorder's bound).
		switch {
		case !storable(&e.Response): // a refusal read from the chunks
			why = ErrNotStorable
		case chunks != nil && e.Size() > c.cfg.maxEntry:
			why = ErrTooLarge
		}
	}
	if why != nil {
		c.stats.notStored.Add(1)
		c.event(ctx, cl, req, stream, Event{Kind: EventNotStored, Err: why})
		return nil
	}
	return e
}

// write stores e in the exact cache and under the call's idempotency key, as it asks.
func (c *Cache) write(ctx context.Context, cl *call, req *llmclient.Request, stream bool, e *Entry) {
	if cl.exact {
		c.set(ctx, cl, req, stream, cl.key, e, c.cfg.ttl)
	}
	if cl.idemKey != "" {
		c.set(ctx, cl, req, stream, cl.idemKey, e, c.cfg.idemTTL)
	}
}

// writeBehind is write on a goroutine that stores an answer behind its call, which no
// caller waits for: a panic of the store or of the observer there would end the program,
// so it is recovered and reported as a store error (ErrStorePanic), the panic's value
// left out, as it may hold the answer or the request.
func (c *Cache) writeBehind(ctx context.Context, cl *call, req *llmclient.Request, stream bool, e *Entry) {
	defer func() {
		if p := recover(); p != nil {
			c.storePanicked(ctx, cl, req, stream, p)
		}
	}()
	c.write(ctx, cl, req, stream, e)
}

// storePanicked reports a panic recovered while an answer was stored behind its call. An
// observer that panics again on that report is not called on: Stats.StoreErrors counts it.
func (c *Cache) storePanicked(ctx context.Context, cl *call, req *llmclient.Request, stream bool, p any) {
	c.stats.storeErrors.Add(1)
	defer func() { _ = recover() }()
	c.event(ctx, cl, req, stream, Event{Kind: EventStoreError, Err: &storePanicError{typ: fmt.Sprintf("%T", p)}})
}

// storePanicError is a panic recovered while an answer was stored; it names the type of
// the panic's value alone.
type storePanicError struct{ typ string }

func (e *storePanicError) Error() string {
	return ErrStorePanic.Error() + " (a value of type " + e.typ + ")"
}

func (e *storePanicError) Unwrap() error { return ErrStorePanic }

func (c *Cache) set(ctx context.Context, cl *call, req *llmclient.Request, stream bool, key string, e *Entry, ttl time.Duration) {
	sctx, cancel := c.storeContext(ctx, true)
	err := c.store.Set(sctx, key, e, ttl)
	cancel()
	if err != nil {
		c.stats.storeErrors.Add(1)
		c.event(ctx, cl, req, stream, Event{Kind: EventStoreError, Err: err})
		return
	}
	c.stats.stored.Add(1)
	c.event(ctx, cl, req, stream, Event{Kind: EventStored})
}

// Reasons an answer is not stored, in EventNotStored's Err.
var (
	// ErrNotStorable: the answer was degraded (WithFallback), filtered or refused.
	ErrNotStorable = errors.New("llmclient/cache: answer not storable (degraded, filtered or refused)")
	// ErrTooLarge: the answer was larger than the entry bound (WithMaxEntryBytes), or a
	// semantic index item (question, answer and embedding) larger than the index's bound
	// (WithMaxSemanticBytes).
	ErrTooLarge = errors.New("llmclient/cache: answer larger than the entry bound")
	// ErrIncomplete: the stream ended with an error or was closed before its end.
	ErrIncomplete = errors.New("llmclient/cache: stream did not end cleanly")
)

// ErrStorePanic, in EventStoreError's Err: the store, or the observer, panicked while an
// answer was stored behind its call (WithStoreTimeout), where no caller waits to get the
// panic. The cache recovers it, so the program goes on and Flush returns, and counts it
// in Stats.StoreErrors; the error names the type of the panic's value, never the value,
// which may hold the request or the answer. A panic on a caller's goroutine (a lookup, a
// store without a store timeout, or to a store that never blocks) reaches the caller.
var ErrStorePanic = errors.New("llmclient/cache: panic while storing an answer")

// Complete answers from the cache, or calls next and stores the answer.
func (h handler) Complete(ctx context.Context, req *llmclient.Request) (*llmclient.Response, error) {
	c := h.c
	if req == nil {
		return h.next.Complete(ctx, req)
	}
	cl := c.prepare(ctx, req)
	e, err := c.lookup(ctx, &cl, req, false)
	if err != nil {
		return nil, err
	}
	if e != nil {
		return e.response(), nil
	}
	return h.miss(ctx, req, cl)
}

// miss calls the upstream, alone or shared, and stores the answer.
func (h handler) miss(ctx context.Context, req *llmclient.Request, cl call) (*llmclient.Response, error) {
	c := h.c
	if cl.idemKey == "" && !c.cfg.dedup {
		resp, err := h.next.Complete(ctx, req)
		if err == nil {
			c.save(ctx, &cl, req, false, resp, nil, nil)
		}
		return resp, err
	}
	// The shared call may outlive its first caller, who may then reuse its Request.
	req = cloneRequest(req)
	// The shared call's goroutine stores the answer once its callers have it (before, in
	// a store that never blocks), and can still be joined meanwhile (flightGroup.run): a
	// repeat in this process gets the answer even before the store has it.
	upstream := func(fctx context.Context) (*llmclient.Response, func(), error) {
		resp, err := h.next.Complete(fctx, req)
		if err != nil {
			return resp, nil, err
		}
		e := c.entry(fctx, &cl, req, false, resp, nil, nil)
		if e == nil {
			return resp, nil, nil
		}
		if c.local {
			c.write(fctx, &cl, req, false, e)
			return resp, nil, nil
		}
		c.writes.add()
		return resp, func() {
			defer c.writes.done()
			c.writeBehind(fctx, &cl, req, false, e)
		}, nil
	}
	var resp *llmclient.Response
	var err error
	var joined bool
	if cl.idemKey != "" {
		resp, err, joined = c.flights.do(ctx, cl.idemKey, cl.fp, flightMode{detach: c.cfg.idemTTL}, upstream)
	} else {
		resp, err, joined = c.flights.do(ctx, cl.key, cl.key, flightMode{}, upstream)
	}
	if joined && !errors.Is(err, ErrIdempotencyMismatch) {
		c.stats.shared.Add(1)
		c.event(ctx, &cl, req, false, Event{Kind: EventShared})
	}
	return resp, err
}

// cloneRequest copies what a caller could change in a Request it reuses: the slices and
// maps down to each message's parts and tool calls. Image bytes, the bytes of tool
// parameters and schemas, cache marks and the values inside Extra are shared.
func cloneRequest(r *llmclient.Request) *llmclient.Request {
	c := *r
	c.Messages = slices.Clone(r.Messages)
	for i := range c.Messages {
		m := &c.Messages[i]
		m.Content = slices.Clone(m.Content)
		m.ToolCalls = slices.Clone(m.ToolCalls)
	}
	c.Tools = slices.Clone(r.Tools)
	c.Stop = slices.Clone(r.Stop)
	c.Metadata = maps.Clone(r.Metadata)
	c.Extra = maps.Clone(r.Extra)
	if r.ToolChoice != nil {
		tc := *r.ToolChoice
		c.ToolChoice = &tc
	}
	if r.ResponseFormat != nil {
		f := *r.ResponseFormat
		c.ResponseFormat = &f
	}
	return &c
}

// Stream answers from the cache as a stream that replays the stored chunks, or opens the
// stream and records it as the caller reads it, to store it once it ends cleanly.
func (h handler) Stream(ctx context.Context, req *llmclient.Request) (*llmclient.Stream, error) {
	c := h.c
	if req == nil {
		return h.next.Stream(ctx, req)
	}
	cl := c.prepare(ctx, req)
	e, err := c.lookup(ctx, &cl, req, true)
	if err != nil {
		return nil, err
	}
	if e != nil {
		return e.stream(), nil
	}
	if cl.idemKey != "" {
		// The first call under the key may be a Complete still in flight: wait for it.
		if resp, err, ok := c.flights.peek(ctx, cl.idemKey, cl.fp); ok {
			if err != nil {
				return nil, err
			}
			c.stats.shared.Add(1)
			c.event(ctx, &cl, req, true, Event{Kind: EventShared})
			return newEntry(resp, nil, time.Now()).stream(), nil
		}
	}
	s, err := h.next.Stream(ctx, req)
	if err != nil || (!cl.exact && (cl.idemKey == "" || cl.ctl.NoStore)) {
		return s, err
	}
	r := newRecorder(c.cfg.maxEntry, func(resp *llmclient.Response, chunks []llmclient.Chunk, why error) {
		c.save(ctx, &cl, req, true, resp, chunks, why)
	})
	return s.Tap(r.chunk, r.end), nil
}
