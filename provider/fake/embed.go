package fake

import (
	"context"
	"hash/fnv"
	"math"
	"slices"
	"time"

	"github.com/llmclient/llmclient"
)

// MaxDimensions bounds the vectors an Embedding step makes: larger lengths (of the step
// or of a request's Dimensions) are clamped to it, so that no input can make the fake
// allocate without bound.
const MaxDimensions = 1 << 16

// DefaultMaxEmbedBatch is what MaxEmbedBatch returns until SetMaxEmbedBatch changes it:
// small, so that tests of batching need few inputs.
const DefaultMaxEmbedBatch = 16

var _ llmclient.Embedder = (*Provider)(nil)

// EmbedStep is a step that answers an Embed call with one vector per input. Build it with
// Embedding. Played by Complete or Stream it fails with a misuse error.
//
// Unless Vectors fixes them, the vectors are deterministic: each is a unit vector computed
// from its input text alone, so the same text always gets the same vector, in any call or
// batch, and different texts get different ones. Their length is the request's Dimensions
// when set, else the step's, at most MaxDimensions.
type EmbedStep struct {
	dims    int
	vectors [][]float32
	usage   *int
	latency time.Duration
	times   int
	forever bool
}

// Embedding returns a step that answers an Embed call with deterministic vectors of dims
// dimensions, clamped to [1, MaxDimensions].
func Embedding(dims int) *EmbedStep {
	return &EmbedStep{dims: min(max(dims, 1), MaxDimensions), times: 1}
}

// Vectors fixes the vectors returned, in input order, whatever the inputs; a call with a
// different number of inputs gets exactly these, as a broken upstream would answer.
func (s *EmbedStep) Vectors(v ...[]float32) *EmbedStep { s.vectors = v; return s }

// Usage sets the reported input tokens. Default: about one token per four bytes of input.
func (s *EmbedStep) Usage(in int) *EmbedStep { s.usage = &in; return s }

// Latency makes the call wait d before answering, or until its context is done. Default 0.
func (s *EmbedStep) Latency(d time.Duration) *EmbedStep { s.latency = d; return s }

// Times makes the step serve n calls (default 1); n < 1 removes it from the script.
func (s *EmbedStep) Times(n int) *EmbedStep { s.times = n; return s }

// Forever makes the step serve every call from now on; steps after it are never reached.
func (s *EmbedStep) Forever() *EmbedStep { s.forever = true; return s }

func (s *EmbedStep) compile(dst []entry) []entry {
	if s == nil {
		return dst
	}
	return append(dst, entry{leaf: s.clone(), times: s.times, forever: s.forever})
}

func (s *EmbedStep) clone() leaf {
	c := *s
	if s.vectors != nil {
		c.vectors = make([][]float32, len(s.vectors))
		for i, v := range s.vectors {
			c.vectors[i] = slices.Clone(v)
		}
	}
	if s.usage != nil {
		u := *s.usage
		c.usage = &u
	}
	return &c
}

func (s *EmbedStep) play(context.Context, *llmclient.Call, bool, int) (*llmclient.Response, llmclient.ProviderStream, error) {
	return nil, nil, misuse("fake: an Embedding step cannot answer Complete or Stream")
}

func (s *EmbedStep) embed(ctx context.Context, call *llmclient.EmbedCall) (*llmclient.EmbedResponse, error) {
	if err := sleep(ctx, s.latency); err != nil {
		return nil, err
	}
	req := call.Request
	out := &llmclient.EmbedResponse{Model: call.Model}
	if out.Model == "" {
		out.Model = req.Model
	}
	if s.vectors != nil {
		out.Vectors = make([][]float32, len(s.vectors))
		for i, v := range s.vectors {
			out.Vectors[i] = slices.Clone(v)
		}
	} else {
		dims := s.dims
		if req.Dimensions > 0 {
			dims = min(req.Dimensions, MaxDimensions)
		}
		out.Vectors = make([][]float32, len(req.Input))
		for i, text := range req.Input {
			out.Vectors[i] = Vector(text, dims)
		}
	}
	in := 0
	if s.usage != nil {
		in = *s.usage
	} else {
		for _, text := range req.Input {
			in += approxTokens(len(text))
		}
	}
	out.Usage = llmclient.Usage{InputTokens: in, TotalTokens: in}
	return out, nil
}

// approxTokens is about one token per four bytes, at least one for non-empty text.
func approxTokens(n int) int {
	if n == 0 {
		return 0
	}
	return max(1, n/4)
}

// Vector returns the unit vector of dims dimensions (clamped to [1, MaxDimensions]) that
// an Embedding step gives text. It lets a test compute the vectors it expects.
func Vector(text string, dims int) []float32 {
	dims = min(max(dims, 1), MaxDimensions)
	h := fnv.New64a()
	_, _ = h.Write([]byte(text))
	x := h.Sum64()
	f64 := make([]float64, dims)
	var norm float64
	for i := range f64 {
		// splitmix64: a well-spread sequence from the text's hash.
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		f := float64(z>>11)/float64(1<<53)*2 - 1
		f64[i] = f
		norm += f * f
	}
	norm = math.Sqrt(norm)
	v := make([]float32, dims)
	for i, f := range f64 {
		if norm > 0 {
			f /= norm
		}
		v[i] = float32(f)
	}
	return v
}

// Embed plays the next step as an embedding call: an Embedding step answers it, a Fail or
// Error step fails it as for Complete; any other step fails it with a misuse error. The
// call is recorded (Record.Embed holds a copy of its request). A call whose context is
// already done takes no step.
func (p *Provider) Embed(ctx context.Context, call *llmclient.EmbedCall) (*llmclient.EmbedResponse, error) {
	if call == nil || call.Request == nil {
		return nil, misuse("fake: nil embed call or request")
	}
	rec := Record{Call: llmclient.Call{Model: call.Model, APIKey: call.APIKey}, Time: time.Now(), Embed: cloneEmbedRequest(call.Request)}
	p.mu.Lock()
	p.records = append(p.records, rec)
	if ctx.Err() != nil {
		p.mu.Unlock()
		return nil, ctxError(ctx)
	}
	l := p.next()
	n := p.served
	p.mu.Unlock()
	switch s := l.(type) {
	case nil:
		return nil, exhausted(n)
	case *EmbedStep:
		return s.embed(ctx, call)
	case *FailStep, *ErrorStep:
		_, _, err := s.play(ctx, &llmclient.Call{Model: call.Model, APIKey: call.APIKey}, false, n)
		return nil, err
	}
	return nil, misuse("fake: only Embedding, Fail and Error steps can answer Embed")
}

// MaxEmbedBatch returns the batch size set by SetMaxEmbedBatch, DefaultMaxEmbedBatch by
// default. The Provider does not enforce it.
func (p *Provider) MaxEmbedBatch() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.maxEmbedBatch == 0 {
		return DefaultMaxEmbedBatch
	}
	return p.maxEmbedBatch
}

// SetMaxEmbedBatch sets what MaxEmbedBatch reports; n < 1 restores the default. It is safe
// for concurrent use.
func (p *Provider) SetMaxEmbedBatch(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.maxEmbedBatch = max(n, 0)
}

func cloneEmbedRequest(r *llmclient.EmbedRequest) *llmclient.EmbedRequest {
	c := *r
	c.Input = slices.Clone(r.Input)
	if r.Metadata != nil {
		c.Metadata = make(map[string]string, len(r.Metadata))
		for k, v := range r.Metadata {
			c.Metadata[k] = v
		}
	}
	if r.Extra != nil {
		c.Extra = make(map[string]any, len(r.Extra))
		for k, v := range r.Extra {
			c.Extra[k] = v
		}
	}
	return &c
}
