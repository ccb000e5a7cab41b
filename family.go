package llmclient

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/llmclient/llmclient/estimate"
)

// A model family is the models that share a tokenizer: their prompts are corrected by one
// ratio against o200k_base (WithTokenRatio overrides it per model name), and the Client
// learns one calibration for them from the prompt tokens their upstreams report, kept
// apart per script of the prompt (see scriptOf). A new tokenizer generation is its own
// family, so that what the Client learns of it does not move the estimates of the older
// models of the same vendor, and the reverse.
//
// A model's family is, in this order:
//  1. the family of the longest WithModelFamily match (the later one on a tie);
//  2. the family of the longest built-in match (defaultFamilies);
//  3. for OpenAI's model names (gpt-, chatgpt-, o1, o3, o4, codex-, text-embedding-,
//     after any "vendor/" prefix), "openai-o200k" or "openai-cl100k" after the encoding
//     estimate.EncodingForModel names;
//  4. else the name's first word: the lower-cased letters after any "vendor/" prefix, up
//     to the first character that is not a letter ("mistral-large-latest" is "mistral",
//     "qwen2.5-72b" is "qwen"). A model group's name is its own family this way.
//
// Families of the fourth kind are bounded: past maxFamilies, new ones share one family.

// familyRule maps the model names that contain match to family; ratio is the family's
// correction against o200k_base (0: the built-in family's, else 1).
type familyRule struct {
	match, family string
	ratio         float64
}

// defaultFamilies are the built-in families, matched by name (the longest match wins),
// with their corrections. None of the ratios is a measurement of ours: the vendors do not
// publish their tokenizers.
//   - claude: Claude up to Opus 4.6. Published comparisons of Claude 3.5 Sonnet with GPT-4o
//     on the same inputs found 16% more tokens for English prose, 21% for maths and 30%
//     for Python code (VentureBeat, May 2025); 1.25 sits between prose and code.
//   - claude-4.7: Claude Opus 4.7 (claude-opus-4-7, April 2026), whose updated tokenizer
//     Anthropic says produces 1.0–1.35× the tokens of the earlier models for the same
//     text depending on the content; 1.25 × 1.35, the top of that range, so that the
//     limiter errs towards admitting less until the calibration has learned the script's
//     real ratio (about 1.45× the earlier models on English text, about 1.0× on CJK).
//   - gemini: Google's rule of thumb is about 4 characters per token, where o200k_base
//     averages about 4.6 bytes per token on English prose (BENCHMARKS.md): 1.15.
//
// Later Claude models that share the 4.7 tokenizer are added with
// WithModelFamily("claude-…", "claude-4.7", 0).
var defaultFamilies = [...]familyRule{
	{"claude", "claude", 1.25},
	{"claude-opus-4-7", "claude-4.7", 1.25 * 1.35},
	{"claude-opus-4.7", "claude-4.7", 1.25 * 1.35},
	{"gemini", "gemini", 1.15},
}

// maxFamilies bounds the families a Client keeps calibrations for; the families named by
// model names past it share familyOverflow.
const (
	maxFamilies    = 256
	familyOverflow = "other"
)

// WithModelFamily declares that the models whose name contains match belong to family: they
// share a tokenizer, so their prompt estimates are corrected by one ratio and calibrated
// together from their usage reports (per script: mostly ASCII, mostly CJK, other), apart
// from other families. ratio is the family's correction against o200k_base, between 0.1
// and 10, or 0 for the built-in family's ratio (1 for a new family). The longest match
// wins, the later one on a tie. It adds to the built-in families — claude (1.25),
// claude-4.7 (claude-opus-4-7, 1.25 × 1.35), gemini (1.15), openai-o200k and openai-cl100k
// (OpenAI's names by encoding, 1), and else the name's first word (1) — and overrides them
// for the names it matches; WithTokenRatio still overrides the ratio per model name. match
// and family must not be empty. The calibrations are the Client's, safe for concurrent
// use, and start anew with each Client.
func WithModelFamily(match, family string, ratio float64) Option {
	return optionFunc(func(c *config) {
		c.limiter.families = append(c.limiter.families, familyRule{match: match, family: family, ratio: ratio})
	})
}

// validateFamilies checks the WithModelFamily rules.
func (c *limiterConfig) validateFamilies() []error {
	var errs []error
	for _, f := range c.families {
		if f.match == "" || f.family == "" {
			errs = append(errs, fmt.Errorf("limiter: model family %q for %q: match and family must not be empty", f.family, f.match))
		}
		if f.ratio != 0 && !(f.ratio >= 0.1 && f.ratio <= 10) {
			errs = append(errs, fmt.Errorf("limiter: model family %q ratio %v is outside [0.1, 10]", f.family, f.ratio))
		}
	}
	return errs
}

// The script classes a family's calibration is kept apart for: a tokenizer's ratio to
// another differs by script (Claude Opus 4.7's against its predecessors: about 1.45× on
// English, about 1.0× on CJK).
const (
	scriptLatin = iota // mostly ASCII
	scriptCJK          // mostly Chinese, Japanese or Korean characters
	scriptOther        // mostly other non-ASCII scripts (Cyrillic, Greek, Arabic, …)
	numScripts
)

// scriptSample bounds the bytes scriptOf reads: up to scriptPart of each text part, at
// most scriptSample in all, so that classifying a request costs a few microseconds
// whatever its size.
const (
	scriptSample = 4096
	scriptPart   = 512
)

// scriptOf returns the script class of req's text: the class with the most estimated
// tokens in a sample of it (ASCII at about 4 bytes a token, CJK characters about one token
// each, other characters about one token per two bytes).
func scriptOf(req *Request) int {
	return pickScript(scriptCounts(req))
}

// scriptCounts returns the counts scriptOf picks the class from: the sample's ASCII bytes,
// the lead bytes of its CJK characters and those of its two-byte characters.
func scriptCounts(req *Request) (ascii, cjk, other int) {
	budget := scriptSample
	for i := range req.Messages {
		for j := range req.Messages[i].Content {
			p := &req.Messages[i].Content[j]
			if p.Type == PartImage || p.Text == "" {
				continue
			}
			s := p.Text[:min(len(p.Text), scriptPart, budget)]
			budget -= len(s)
			words := true // after an ASCII byte: try eight bytes at a time
			for k := 0; k < len(s); {
				if words {
					for k+8 <= len(s) && word(s[k:k+8])&0x8080808080808080 == 0 {
						ascii += 8
						k += 8
					}
					if k == len(s) {
						break
					}
					// Fewer than eight bytes left, all ASCII: the word that ends s tells
					// it in one load.
					if r := len(s) - k; r < 8 && len(s) >= 8 && word(s[len(s)-8:])>>(64-8*uint(r))&0x8080808080808080 == 0 {
						ascii += r
						break
					}
				}
				b := s[k]
				k++
				words = b < 0x80
				switch {
				case b < 0x80:
					ascii++
				case b >= 0xE3 && b <= 0xED: // leads U+3000–U+DFFF: kana, CJK ideographs, Hangul
					cjk++
				case b >= 0xC2 && b <= 0xDF: // two-byte characters
					other++
				}
			}
			if budget == 0 {
				return ascii, cjk, other
			}
		}
	}
	return ascii, cjk, other
}

// word returns the first eight bytes of s, little-endian, in one load.
func word(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func pickScript(ascii, cjk, other int) int {
	latin, cjkTokens, otherTokens := ascii/4, cjk, other/2
	switch {
	case cjkTokens > latin && cjkTokens >= otherTokens:
		return scriptCJK
	case otherTokens > latin:
		return scriptOther
	}
	return scriptLatin
}

// family is one model family's learned calibration, per script class.
type family struct {
	name  string
	cells [numScripts]calibCell
}

// calibCell learns the ratio of the prompt tokens an upstream reports to the Client's
// estimate (after the family's ratio) for one family and script: a running mean over the
// last calibWindow reports, used once calibAfter have come, bounded to [calibMin,
// calibMax]. Reads are one atomic load; reports take its lock.
type calibCell struct {
	factor atomic.Uint64 // float64 bits; 0: none learned yet (1)
	mu     sync.Mutex
	n      float64
	mean   float64
}

const (
	calibAfter  = 3
	calibWindow = 20
	calibMin    = 0.25
	calibMax    = 4
	// calibSmallest is the smallest estimate a report teaches anything with: the framing
	// of a short prompt dominates its count.
	calibSmallest = 50
)

// get returns the learned factor, 1 until known.
func (c *calibCell) get() float64 {
	if b := c.factor.Load(); b != 0 {
		return math.Float64frombits(b)
	}
	return 1
}

// observe learns from one report of input prompt tokens against the estimate est.
func (c *calibCell) observe(est, input int) {
	if est < calibSmallest || input <= 0 {
		return
	}
	r := min(max(float64(input)/float64(est), calibMin), calibMax)
	c.mu.Lock()
	c.n = min(c.n+1, calibWindow)
	c.mean += (r - c.mean) / c.n
	if c.n >= calibAfter {
		c.factor.Store(math.Float64bits(c.mean))
	}
	c.mu.Unlock()
}

// familySet holds a Client's families, created on first use. Safe for concurrent use.
type familySet struct {
	mu     sync.Mutex
	byName map[string]*family
}

// get returns the family named name, created when new; past maxFamilies, the overflow
// family.
func (fs *familySet) get(name string) *family {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f, ok := fs.byName[name]; ok {
		return f
	}
	if fs.byName == nil {
		fs.byName = make(map[string]*family)
	}
	if len(fs.byName) >= maxFamilies {
		name = familyOverflow
		if f, ok := fs.byName[name]; ok {
			return f
		}
	}
	f := &family{name: name}
	fs.byName[name] = f
	return f
}

// modelInfo is what the limiter needs of a model name: its family and its ratio.
type modelInfo struct {
	model  string
	family string
	ratio  float64
	fam    *family // nil without a familySet
}

// matchFamily returns model's family name and the family's ratio (see the rules above).
func (c *limiterConfig) matchFamily(model string) (string, float64) {
	best, name, ratio := -1, "", 0.0
	for i := range c.families {
		r := &c.families[i]
		if len(r.match) >= best && len(r.match) <= len(model) && strings.Contains(model, r.match) {
			best, name, ratio = len(r.match), r.family, r.ratio
		}
	}
	if best >= 0 {
		if ratio == 0 {
			ratio = builtinFamilyRatio(name)
		}
		return name, ratio
	}
	for i := range defaultFamilies {
		r := &defaultFamilies[i]
		if len(r.match) > best && len(r.match) <= len(model) && strings.Contains(model, r.match) {
			best, name, ratio = len(r.match), r.family, r.ratio
		}
	}
	if best >= 0 {
		return name, ratio
	}
	base := model[strings.LastIndexByte(model, '/')+1:]
	if isOpenAIModel(base) {
		if estimate.EncodingForModel(base) == "cl100k_base" {
			return "openai-cl100k", 1
		}
		return "openai-o200k", 1
	}
	return firstWord(base), 1
}

// builtinFamilyRatio is the built-in ratio of the family named name, 1 for another.
func builtinFamilyRatio(name string) float64 {
	for i := range defaultFamilies {
		if defaultFamilies[i].family == name {
			return defaultFamilies[i].ratio
		}
	}
	return 1
}

// isOpenAIModel reports whether name (without a vendor prefix) is one of OpenAI's.
func isOpenAIModel(name string) bool {
	for _, p := range [...]string{"gpt-", "chatgpt-", "codex-", "text-embedding-"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	// The o-series: o1, o3, o4-mini and their dated and sized names.
	return len(name) >= 2 && name[0] == 'o' && name[1] >= '1' && name[1] <= '9' &&
		(len(name) == 2 || name[2] == '-')
}

// firstWord returns the lower-cased leading letters of name ("" for none).
func firstWord(name string) string {
	n := 0
	for n < len(name) && n < 32 {
		b := name[n] | 0x20
		if b < 'a' || b > 'z' {
			break
		}
		n++
	}
	return strings.ToLower(name[:n])
}

// calibration is what a run remembers of its prompt estimate to learn from its usage:
// the cell of its model's family and script, and the estimate before the learned factor.
type calibration struct {
	cell *calibCell
	raw  int
}

// learn teaches the run's calibration the prompt tokens the upstream reported for the
// request the estimate was made for. Estimated usage teaches nothing.
func (cal *calibration) learn(u *Usage) {
	if cal.cell != nil && u != nil && !u.Estimated {
		cal.cell.observe(cal.raw, u.InputTokens)
	}
}
