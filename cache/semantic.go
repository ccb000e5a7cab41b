package cache

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/health"
)

// Semantic is a semantic cache: it answers a question asked in other words with the
// answer to a cached question whose embedding is similar enough (cosine similarity at
// least the threshold) and that every guard accepts.
//
// Only the last message counts as the question, and only when it is a user message made
// of text: everything else in the request (model, system prompt, earlier turns, the
// question's Name, tools, parameters, the partition) must be the same exactly, so a
// question is only ever compared with questions asked in the same conversation state.
// Calls whose last message is not a user text message bypass it.
//
// The index is in memory, bounded by WithMaxEntries and WithMaxSemanticBytes (10,000
// questions, 64 MiB by default); entries expire after the TTL (WithTTL). An embedding
// that is empty, longer than MaxEmbeddingDimensions, zero, NaN or infinite is never
// kept: its call goes to the model, as when the embedder fails. A question whose
// embedding's length differs from a cached one's is never compared with it. Every call with a question costs one embedding call, made under the
// caller's context (bound it in the Embedder if it may be slow); an embedder that fails
// sends the call to the model. Put it after a Cache's middleware, so that exact repeats
// are served before any embedding is computed. A Semantic is safe for concurrent use.
type Semantic struct {
	emb Embedder
	cfg config

	mu      sync.Mutex
	buckets map[string]*list.List // scope → questions, most recently used first
	lru     list.List             // all questions, most recently used first; values *semItem
	bytes   int64                 // the items' sizes
	stats   semCounters
}

type semItem struct {
	scope    string
	question string
	vec      []float32 // unit length, up to float32 rounding
	norm2    float64   // vec's squared length, to correct that rounding
	entry    *Entry
	expires  time.Time
	size     int64
	inBucket *list.Element
}

// semItemOverhead is the memory of an index item besides its strings, vector and entry.
const semItemOverhead = 160

// itemSize is what an index item holds, in bytes: its entry (Entry.Size), question, scope
// and vector.
func itemSize(it *semItem) int64 {
	return int64(semItemOverhead + it.entry.Size() + len(it.question) + len(it.scope) + 4*len(it.vec))
}

type semCounters struct {
	hits, misses, bypasses, rejected, stored, notStored, errors atomic.Uint64
	// evictions and expired are written with mu held.
	evictions, expired atomic.Uint64
}

// NewSemantic returns a semantic cache that embeds questions with emb, configured by
// opts. It validates every option and reports all problems in one error.
func NewSemantic(emb Embedder, opts ...Option) (*Semantic, error) {
	if emb == nil {
		return nil, errors.New("llmclient/cache: nil embedder")
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
	return &Semantic{emb: emb, cfg: cfg, buckets: make(map[string]*list.List)}, nil
}

// Middleware returns the middleware that serves calls from the semantic cache.
func (s *Semantic) Middleware() llmclient.Middleware {
	return func(next llmclient.Handler) llmclient.Handler { return semHandler{s: s, next: next} }
}

type semHandler struct {
	s    *Semantic
	next llmclient.Handler
}

// semCall is what the semantic cache works out once per call.
type semCall struct {
	partition, scope, question string
	vec                        []float32
	norm2                      float64
	store                      bool
}

// question returns the last message's text when it is a user message of text parts.
func question(req *llmclient.Request) (string, bool) {
	if len(req.Messages) == 0 {
		return "", false
	}
	m := req.Messages[len(req.Messages)-1]
	if m.Role != llmclient.RoleUser || len(m.ToolCalls) > 0 || len(m.Content) == 0 {
		return "", false
	}
	for _, p := range m.Content {
		if p.Type != llmclient.PartText {
			return "", false
		}
	}
	q := m.Text()
	return q, q != ""
}

func (s *Semantic) event(ctx context.Context, sc *semCall, req *llmclient.Request, stream bool, e Event) {
	if s.cfg.observer == nil {
		return
	}
	e.Semantic, e.Partition, e.Model, e.Stream = true, sc.partition, req.Model, stream
	s.cfg.observer(ctx, e)
}

// lookup returns the entry that answers the call, or prepares sc for storing the answer.
func (s *Semantic) lookup(ctx context.Context, req *llmclient.Request, stream bool) (*Entry, *semCall) {
	sc := &semCall{partition: s.cfg.partition(ctx, req)}
	ctl := ControlFrom(ctx)
	q, ok := question(req)
	if !ok || s.cfg.ttl == 0 || ctl.NoStore {
		s.stats.bypasses.Add(1)
		s.event(ctx, sc, req, stream, Event{Kind: EventBypass})
		return nil, sc
	}
	sc.scope = s.scope(sc.partition, req)
	sc.question = q
	vecs, err := s.emb.Embed(ctx, []string{q})
	if err == nil && len(vecs) != 1 {
		err = fmt.Errorf("llmclient/cache: embedder returned %d vectors for 1 text", len(vecs))
	}
	var vec []float32
	switch {
	case err != nil:
	case len(vecs[0]) > MaxEmbeddingDimensions:
		err = fmt.Errorf("llmclient/cache: embedding of %d dimensions, more than MaxEmbeddingDimensions (%d)", len(vecs[0]), MaxEmbeddingDimensions)
	default:
		vec, err = unit(vecs[0])
	}
	if err != nil {
		s.stats.errors.Add(1)
		s.event(ctx, sc, req, stream, Event{Kind: EventStoreError, Err: err})
		return nil, sc
	}
	sc.vec, sc.norm2, sc.store = vec, dot(vec, vec), true
	if !ctl.lookup() {
		s.stats.bypasses.Add(1)
		s.event(ctx, sc, req, stream, Event{Kind: EventBypass})
		return nil, sc
	}
	now := time.Now()
	cands, nearest := s.candidates(sc.scope, vec, sc.norm2, now, ctl)
	rejected, best := false, 0.0
	for _, c := range cands {
		if s.guarded(q, c.item.question) {
			s.touch(c.item)
			s.stats.hits.Add(1)
			s.event(ctx, sc, req, stream, Event{Kind: EventHit, Similarity: c.sim, Age: now.Sub(c.item.entry.Created)})
			return c.item.entry, sc
		}
		if !rejected {
			rejected, best = true, c.sim
		}
	}
	if rejected {
		s.stats.rejected.Add(1)
		s.event(ctx, sc, req, stream, Event{Kind: EventGuardRejected, Similarity: best})
		return nil, sc
	}
	s.stats.misses.Add(1)
	s.event(ctx, sc, req, stream, Event{Kind: EventMiss, Similarity: nearest})
	return nil, sc
}

// scope keys everything of req but its question: the request without its last message,
// and of that message what else reaches the vendor (its Name; its role is user and its
// parts are text, or there is no question).
func (s *Semantic) scope(partition string, req *llmclient.Request) string {
	rest := *req
	rest.Messages = req.Messages[:len(req.Messages)-1]
	w := getWriter()
	writeKey(w, s.cfg.namespace, partition, &rest, s.cfg.metadataKeys)
	w.str(req.Messages[len(req.Messages)-1].Name)
	out := w.hexSum(0)
	putWriter(w)
	return out
}

func (s *Semantic) guarded(question, cached string) bool {
	for _, g := range s.cfg.guards {
		if !g(question, cached) {
			return false
		}
	}
	return true
}

type candidate struct {
	item *semItem
	sim  float64
}

// candidates returns the live questions of scope at least as similar as the threshold,
// most similar first, and the best similarity of all the questions compared (0 when
// none was). It holds the lock only to scan.
func (s *Semantic) candidates(scope string, vec []float32, norm2 float64, now time.Time, ctl Control) ([]candidate, float64) {
	var out []candidate
	nearest, compared := 0.0, false
	s.mu.Lock()
	if b := s.buckets[scope]; b != nil {
		for el := b.Front(); el != nil; {
			next := el.Next()
			it := el.Value.(*list.Element).Value.(*semItem)
			switch {
			case !now.Before(it.expires):
				s.removeLocked(el.Value.(*list.Element))
				s.stats.expired.Add(1)
			case len(it.vec) == len(vec) && ctl.accepts(it.entry.Created, now):
				sim := cosine(vec, it.vec, norm2, it.norm2)
				if !compared || sim > nearest {
					nearest, compared = sim, true
				}
				if sim >= s.cfg.threshold {
					out = append(out, candidate{it, sim})
				}
			}
			el = next
		}
	}
	s.mu.Unlock()
	slices.SortStableFunc(out, func(a, b candidate) int {
		switch {
		case a.sim > b.sim:
			return -1
		case a.sim < b.sim:
			return 1
		}
		return 0
	})
	return out, nearest
}

// touch marks it as recently used, if it is still indexed.
func (s *Semantic) touch(it *semItem) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if it.inBucket == nil {
		return
	}
	gl := it.inBucket.Value.(*list.Element)
	s.lru.MoveToFront(gl)
	s.buckets[it.scope].MoveToFront(it.inBucket)
}

// newItem makes the index item of an answer to the call's question.
func (s *Semantic) newItem(sc *semCall, e *Entry) *semItem {
	it := &semItem{scope: sc.scope, question: sc.question, vec: sc.vec, norm2: sc.norm2, entry: e,
		expires: expiry(e.Created, s.cfg.ttl)}
	it.size = itemSize(it)
	return it
}

// insert indexes it, evicting the least recently used questions past the bounds. it is no
// larger than the byte bound.
func (s *Semantic) insert(it *semItem) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	// s.bytes never exceeds maxBytes, so maxBytes-s.bytes cannot overflow.
	for s.lru.Len() > 0 && (s.lru.Len() >= s.cfg.maxEntries || it.size > s.cfg.maxBytes-s.bytes) {
		back := s.lru.Back()
		if now.Before(back.Value.(*semItem).expires) {
			s.stats.evictions.Add(1)
		} else {
			s.stats.expired.Add(1)
		}
		s.removeLocked(back)
	}
	b := s.buckets[it.scope]
	if b == nil {
		b = list.New()
		s.buckets[it.scope] = b
	}
	gl := s.lru.PushFront(it)
	it.inBucket = b.PushFront(gl)
	s.bytes += it.size
}

// removeLocked drops the question at gl (an element of s.lru). s.mu is held.
func (s *Semantic) removeLocked(gl *list.Element) {
	it := gl.Value.(*semItem)
	s.lru.Remove(gl)
	s.bytes -= it.size
	b := s.buckets[it.scope]
	b.Remove(it.inBucket)
	it.inBucket = nil
	if b.Len() == 0 {
		delete(s.buckets, it.scope)
	}
}

func (s *Semantic) save(ctx context.Context, sc *semCall, req *llmclient.Request, stream bool, resp *llmclient.Response, chunks []llmclient.Chunk, why error) {
	if !sc.store {
		return
	}
	if why == nil && !storable(resp) {
		why = ErrNotStorable
	}
	var it *semItem
	if why == nil {
		e := newEntry(resp, chunks, time.Now())
		if !storable(&e.Response) { // a refusal read from the chunks
			why = ErrNotStorable
		} else if e.Size() > s.cfg.maxEntry {
			why = ErrTooLarge
		} else if it = s.newItem(sc, e); it.size > s.cfg.maxBytes {
			why = fmt.Errorf("%w: question, answer and embedding hold %d bytes, more than WithMaxSemanticBytes", ErrTooLarge, it.size)
		}
	}
	if why != nil {
		s.stats.notStored.Add(1)
		s.event(ctx, sc, req, stream, Event{Kind: EventNotStored, Err: why})
		return
	}
	s.insert(it)
	s.stats.stored.Add(1)
	s.event(ctx, sc, req, stream, Event{Kind: EventStored})
}

// Complete answers from a similar cached question, or calls next and indexes the answer.
func (h semHandler) Complete(ctx context.Context, req *llmclient.Request) (*llmclient.Response, error) {
	if req == nil {
		return h.next.Complete(ctx, req)
	}
	e, sc := h.s.lookup(ctx, req, false)
	if e != nil {
		return e.response(), nil
	}
	resp, err := h.next.Complete(ctx, req)
	if err == nil {
		h.s.save(ctx, sc, req, false, resp, nil, nil)
	}
	return resp, err
}

// Stream answers from a similar cached question as a replayed stream, or opens the stream
// and records it to index it once it ends cleanly.
func (h semHandler) Stream(ctx context.Context, req *llmclient.Request) (*llmclient.Stream, error) {
	if req == nil {
		return h.next.Stream(ctx, req)
	}
	e, sc := h.s.lookup(ctx, req, true)
	if e != nil {
		return e.stream(), nil
	}
	st, err := h.next.Stream(ctx, req)
	if err != nil || !sc.store {
		return st, err
	}
	r := newRecorder(h.s.cfg.maxEntry, func(resp *llmclient.Response, chunks []llmclient.Chunk, why error) {
		h.s.save(ctx, sc, req, true, resp, chunks, why)
	})
	return st.Tap(r.chunk, r.end), nil
}

// SemanticStats is a snapshot of a semantic cache's statistics.
type SemanticStats struct {
	// Hits, Misses and GuardRejections count lookups: a similar question that every guard
	// accepted, none similar enough, similar ones that a guard rejected.
	Hits, Misses, GuardRejections uint64
	// Bypasses counts calls without a usable question, or that a Control skipped.
	Bypasses uint64
	// Stored and NotStored count answers indexed, and answers that were not storable.
	Stored, NotStored uint64
	// EmbedErrors counts failed embedding calls and unusable vectors.
	EmbedErrors uint64
	// Entries is the number of questions indexed now, expired ones not yet dropped
	// included, and Bytes what they hold (their entries' Entry.Size, questions, vectors
	// and a fixed overhead each), at most WithMaxSemanticBytes.
	Entries int
	Bytes   int64
	// Evictions counts questions dropped to stay within WithMaxEntries and
	// WithMaxSemanticBytes, Expired those dropped once their TTL had passed.
	Evictions, Expired uint64
}

// HitRate is Hits / (Hits + Misses + GuardRejections), 0 before any lookup.
func (s SemanticStats) HitRate() float64 {
	if n := s.Hits + s.Misses + s.GuardRejections; n > 0 {
		return float64(s.Hits) / float64(n)
	}
	return 0
}

// Stats returns the semantic cache's statistics so far; safe to call concurrently.
func (s *Semantic) Stats() SemanticStats {
	st := SemanticStats{Hits: s.stats.hits.Load(), Misses: s.stats.misses.Load(),
		GuardRejections: s.stats.rejected.Load(), Bypasses: s.stats.bypasses.Load(),
		Stored: s.stats.stored.Load(), NotStored: s.stats.notStored.Load(), EmbedErrors: s.stats.errors.Load()}
	s.mu.Lock()
	st.Entries, st.Bytes = s.lru.Len(), s.bytes
	st.Evictions, st.Expired = s.stats.evictions.Load(), s.stats.expired.Load()
	s.mu.Unlock()
	return st
}

// Health returns the semantic cache's statistics as a Client's Snapshot reports them:
// register it with llmclient.WithCacheStats(name, s.Health). Safe to call concurrently.
func (s *Semantic) Health() health.Cache {
	st := s.Stats()
	return health.Cache{Semantic: true, Hits: st.Hits, Misses: st.Misses, GuardRejections: st.GuardRejections,
		Bypasses: st.Bypasses, HitRate: st.HitRate(), Stored: st.Stored, NotStored: st.NotStored,
		Errors: st.EmbedErrors, Entries: int64(st.Entries), Bytes: st.Bytes, Evictions: st.Evictions, Expired: st.Expired}
}

// unit returns v scaled to length 1 (a copy), or an error for an empty, zero, NaN or
// infinite vector. Its caller refuses vectors longer than MaxEmbeddingDimensions first.
func unit(v []float32) ([]float32, error) {
	if len(v) == 0 {
		return nil, errors.New("llmclient/cache: empty embedding")
	}
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	norm := math.Sqrt(sum)
	if norm == 0 || math.IsNaN(norm) || math.IsInf(norm, 0) {
		return nil, errors.New("llmclient/cache: embedding has no direction (zero, NaN or infinite)")
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / norm)
	}
	return out, nil
}

// cosine is the cosine similarity of two vectors of the same length whose squared
// lengths are na and nb. Dividing by their lengths corrects the rounding of vectors made
// unit in float32, whose dot product with themselves is 1 only within 1e-7 or so: a
// vector's similarity with itself is exactly 1 (sqrt(x*x) is x in binary floating point),
// so that WithThreshold(1) matches the same direction.
func cosine(a, b []float32, na, nb float64) float64 {
	return dot(a, b) / math.Sqrt(na*nb)
}

// dot is the dot product of two vectors of the same length.
func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}
