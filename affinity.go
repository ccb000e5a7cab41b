package llmclient

import (
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/llmclient/llmclient/routing"
)

// Prompt-cache affinity. The vendors cache a prompt's prefix per organisation, key or
// machine: OpenAI routes a request to a cache machine by a hash of its first ~256 tokens
// (and its prompt_cache_key), Anthropic and Gemini cache per workspace or project. Calls
// that share a long prefix read the cache only if they reach the same upstream, and with
// a key pool, the same key. With WithCacheAffinity, each such call starts on the
// upstream, and uses the key, that a rendezvous hash (highest random weight) of its prefix
// ranks first:
//
//   - the prefix is the model name and the first prefixBytes bytes of the request as the
//     vendors render it (tool definitions, then the messages in order: roles and names,
//     tool results' call IDs and error flags, texts, image URLs or data, tool calls), or
//     Request.PromptCacheKey when set; a prompt shorter than prefixBytes has no affinity
//     (too short for the vendors' caches, whose minimum is 1,024 tokens);
//   - the upstream: among the route's members, the highest score hash(prefix, name), with
//     weights under routing.Weighted (weighted rendezvous: −w/ln u), for routes whose strategy
//     spreads calls (routing.Weighted, routing.LeastInFlight, routing.Latency); an ordered route (a
//     failover chain) keeps its order, and a Pin keeps the caller's;
//   - the key: among the upstream's keys, the highest score hash(prefix, key identity),
//     the key identity being the one its limiter state is stored under (the secret's
//     fingerprint, the key source's number), so that every replica ranks alike.
//
// When the ranked upstream cannot serve (its availability: drained, breaker open or
// tripped elsewhere, every key out, demoted), or the ranked key is out (cooling, evicted,
// paused), the call makes the usual choice instead, and returns to the ranked one when it
// serves again: adding or removing an upstream or key moves only the prefixes it ranks
// first. A Transport request's prefix is its text as the upstream's dialect reads it from
// the body (Dialect.Inspect), or its OpenAI prompt_cache_key; a body too large to buffer
// has none. Embeddings have no affinity: no vendor caches their input.

// maxAffinityPrefix bounds WithCacheAffinity's prefix: hashing it is a pass over that many
// bytes of each call's request.
const maxAffinityPrefix = 1 << 20

// WithCacheAffinity routes the calls whose prompts share their first prefixBytes bytes (or
// their Request.PromptCacheKey) to the same upstream and key, so that they read the
// vendor's prompt cache (see the rules above: a rendezvous hash, with the usual choice
// whenever the ranked upstream or key cannot serve). 4096 bytes is about 1,024 tokens of
// English, the smallest prompt OpenAI caches. prefixBytes must be in [0, 1 MiB]; 0 (the
// default) turns affinity off.
func WithCacheAffinity(prefixBytes int) Option {
	return optionFunc(func(c *config) { c.affinity = prefixBytes })
}

// validateAffinity checks WithCacheAffinity.
func (c *config) validateAffinity() []error {
	if c.affinity < 0 || c.affinity > maxAffinityPrefix {
		return []error{fmt.Errorf("WithCacheAffinity: prefix of %d bytes is outside [0, %d]", c.affinity, maxAffinityPrefix)}
	}
	return nil
}

// FNV-1a, 64 bits, for names.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// wordPrime is the multiplier of prefixHash's word steps (2^64 over the golden ratio).
const wordPrime = 0x9e3779b97f4a7c15

// prefixHash hashes the bytes of a request's prefix until it holds want bytes: eight
// bytes a step (a multiply and a rotation), the same in every process.
type prefixHash struct {
	h    uint64
	left int
}

// add hashes s, or as much of it as the prefix still takes, and a separator.
func (p *prefixHash) add(s string) { p.h, p.left = hashPrefix(p.h, p.left, s) }

// addBytes is add for a byte slice.
func (p *prefixHash) addBytes(b []byte) { p.h, p.left = hashPrefix(p.h, p.left, b) }

// hashPrefix hashes up to left bytes of s into h, then the count hashed as a separator
// of the parts, and returns the hash and what is left.
func hashPrefix[T string | []byte](h uint64, left int, s T) (uint64, int) {
	n := min(len(s), left)
	i := 0
	for ; i+8 <= n; i += 8 {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		h = bits.RotateLeft64((h^x)*wordPrime, 31)
	}
	for ; i < n; i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return bits.RotateLeft64((h^uint64(n))*wordPrime, 31), left - n
}

// hashString is FNV-1a of s.
func hashString(s string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return h
}

// affinityOf returns the affinity hash of req with a prefix of n bytes: of its
// PromptCacheKey when set, else of its model and first n bytes, 0 (none) when its prompt is
// shorter or n is 0.
func affinityOf(req *Request, n int) uint64 {
	if n <= 0 {
		return 0
	}
	if req.PromptCacheKey != "" {
		return mix64(hashString(req.Model) ^ mix64(hashString(req.PromptCacheKey)))
	}
	p := prefixHash{h: hashString(req.Model), left: n}
	for i := range req.Tools {
		t := &req.Tools[i]
		p.add(t.Name)
		p.add(t.Description)
		p.addBytes(t.Parameters)
		if p.left == 0 {
			return mix64(p.h)
		}
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		p.add(string(m.Role))
		p.add(m.Name)
		p.add(m.ToolCallID)
		if m.IsError {
			p.add("is_error")
		}
		for j := range m.Content {
			c := &m.Content[j]
			p.add(c.Text)
			p.add(c.ImageURL)
			p.addBytes(c.ImageData)
		}
		for j := range m.ToolCalls {
			p.add(m.ToolCalls[j].Name)
			p.add(m.ToolCalls[j].Arguments)
		}
		if p.left == 0 {
			return mix64(p.h)
		}
	}
	return 0 // shorter than the prefix
}

// mix64 is a 64-bit finalizer (splitmix64's): every input bit moves every output bit.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// hrw is the rendezvous score of the member id for the affinity h: the highest wins.
func hrw(h, id uint64) uint64 { return mix64(h ^ mix64(id)) }

// weightedHRW is the weighted rendezvous score of a member of weight w: −w/ln u, u the
// score as a number in (0, 1); the highest wins, each member with probability
// proportional to its weight.
func weightedHRW(h, id uint64, w uint64) float64 {
	u := (float64(hrw(h, id)>>11) + 0.5) / (1 << 53)
	return -float64(w) / math.Log(u)
}

// affine starts the run on the upstream its affinity ranks first when that one can serve
// now, the other members keeping their order (ordered later by s, as order does). It
// reports whether it did; otherwise the caller makes the usual choice.
func (r *run) affine(s routing.Policy) bool {
	route := r.route
	b, best, bestW := 0, uint64(0), -1.0
	for i, up := range route {
		id := hashString(up.Name)
		if s == routing.Weighted {
			if w := weightedHRW(r.affinity, id, weightOf(up)); w > bestW {
				b, bestW = i, w
			}
		} else if sc := hrw(r.affinity, id); i == 0 || sc > best {
			b, best = i, sc
		}
	}
	if !route[b].healthy(r.start) {
		return false
	}
	r.restBy = s
	if b == 0 {
		return true
	}
	out := r.own(len(route))
	out[0] = route[b]
	j := 1
	for i, up := range route {
		if i != b {
			out[j] = up
			j++
		}
	}
	r.route = out
	return true
}

// affinityID is the identity of k in rendezvous hashing: the hash of its store scope
// without the upstream's name (its secret's fingerprint, its source's number), alike in
// every replica whatever order it lists the keys in. Computed once.
func (k *poolKey) affinityID() uint64 {
	if id := k.hrwID.Load(); id != 0 {
		return id
	}
	id := hashString(k.scope("")) | 1
	k.hrwID.Store(id)
	return id
}

// pickFor is pick with the affinity h (0: none): the key that h ranks first, when it is
// not avoid and is usable now (not cooling down, evicted or paused: outUntil), else the
// usual pick. It marks the key in flight.
func (p *keyPool) pickFor(now time.Time, avoid *poolKey, h uint64) (*poolKey, time.Time) {
	if h != 0 && len(p.keys) > 1 {
		var ranked *poolKey
		var best uint64
		for _, k := range p.keys {
			if sc := hrw(h, k.affinityID()); ranked == nil || sc > best {
				ranked, best = k, sc
			}
		}
		if until, _ := ranked.outUntil(now); ranked != avoid && until.IsZero() {
			ranked.inFlight.Add(1)
			return ranked, time.Time{}
		}
	}
	return p.pick(now, avoid)
}
