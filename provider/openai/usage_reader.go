package openai

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"sync/atomic"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/internal/jsonscan"
)

// ReadUsage reads the usage and model of a one-shot Chat Completions or Responses body
// (llmclient.UsageReader), for the transport's pricing; ok is false for other shapes and
// for a body without a usage object.
func (p *Provider) ReadUsage(shape dialect.Shape, body []byte) (llmclient.Usage, string, bool) {
	switch shape {
	case ShapeChatCompletions:
		return readChatUsage(body)
	case ShapeResponses:
		var r struct {
			Model string     `json:"model"`
			Usage *respUsage `json:"usage"`
		}
		if json.Unmarshal(body, &r) != nil || r.Usage == nil {
			return llmclient.Usage{}, "", false
		}
		return r.Usage.usage(), r.Model, true
	}
	return llmclient.Usage{}, "", false
}

// ReadTokenUsage is ReadUsage without the model's name, which only pricing needs: the
// transport reads the usage alone when the Client keeps no price. It returns the usage
// and ok ReadUsage returns for the same body.
func (p *Provider) ReadTokenUsage(shape dialect.Shape, body []byte) (llmclient.Usage, bool) {
	if shape == ShapeChatCompletions {
		if u, ok := readUsageMember(body); ok {
			return u, true
		}
	}
	u, _, ok := p.ReadUsage(shape, body)
	return u, ok
}

// readChatUsage reads a Chat Completions body's model and usage with the scanner, as the
// transport does for every one-shot answer under a token limit: no allocation but the
// model's name. The vendors put "usage" last and "model" first: they are looked up there,
// and the whole body is scanned only when that fails.
func readChatUsage(body []byte) (llmclient.Usage, string, bool) {
	if u, ok := readUsageMember(body); ok {
		var model string
		if v, ok := memberValue(body, false, modelKey); ok {
			model = modelValue(v)
		}
		return u, model, true
	}
	return readChatUsageScan(body)
}

// modelValue reads the string value at the start of v (after white space) as the model's
// name; "" when v holds no string. A name without escapes is taken as it is, as the
// scanner would read it; any other is left to the scanner.
func modelValue(v []byte) string {
	i := skipSpace(v, 0)
	if i < len(v) && v[i] == '"' {
		for k := i + 1; k < len(v); k++ {
			if v[k] == '"' {
				return modelName(v[i+1 : k])
			}
			if v[k] == '\\' {
				break
			}
		}
	}
	var sc jsonscan.Scanner
	sc.Reset(v)
	if sc.Peek() == jsonscan.String {
		return modelName(sc.Str())
	}
	return ""
}

// lastModel is the model name readChatUsage returned last: an answer that names the same
// model again costs no allocation. Safe for concurrent use.
var lastModel atomic.Pointer[string]

// modelName returns b as a string, the one lastModel holds when it is the same.
func modelName(b []byte) string {
	if p := lastModel.Load(); p != nil && *p == string(b) {
		return *p
	}
	s := string(b)
	lastModel.Store(&s)
	return s
}

// memberValue returns what follows the colon after name's first (or last) occurrence as a
// key: name with an unescaped opening quote, then a colon.
func memberValue(body []byte, last bool, name []byte) ([]byte, bool) {
	var i int
	if last {
		i = lastIndex(body, name)
	} else {
		i = firstIndex(body, name)
	}
	if i < 0 {
		return nil, false
	}
	bs := 0
	for k := i - 1; k >= 0 && body[k] == '\\'; k-- {
		bs++
	}
	if bs%2 == 1 {
		return nil, false
	}
	j := i + len(name)
	for j < len(body) && (body[j] == ' ' || body[j] == '\t' || body[j] == '\n' || body[j] == '\r') {
		j++
	}
	if j >= len(body) || body[j] != ':' {
		return nil, false
	}
	return body[j+1:], true
}

// The keys readChatUsage looks for, quoted.
var modelKey, usageKey = []byte(`"model"`), []byte(`"usage"`)

// firstIndex returns the index of name's first occurrence in body, or -1; name begins
// with a quote. It searches for the rest of name, which starts with a rarer byte than the
// quotes around every JSON string, and then looks for the quote before it.
func firstIndex(body []byte, name []byte) int {
	for from := 1; from < len(body); {
		k := bytes.Index(body[from:], name[1:])
		if k < 0 {
			return -1
		}
		if i := from + k - 1; body[i] == '"' {
			return i
		}
		from += k + 1
	}
	return -1
}

// lastIndex returns the index of name's last occurrence in body, or -1; name is at least
// three bytes long. It looks from the end for the third byte from name's end ('g' of
// "usage", rare in the usage object that the vendors write last, a few dozen bytes from
// the end of however long a body), eight bytes at a time, and compares name around each
// such byte.
func lastIndex(body []byte, name []byte) int {
	n := len(name)
	k := n - 3 // name's pivot byte
	c := name[k]
	j := len(body) // the bytes before j are left to look at
	for ; j >= 8; j -= 8 {
		w := binary.LittleEndian.Uint64(body[j-8 : j : j])
		for m := zeroBytes(w ^ uint64(c)*ones); m != 0; {
			b := 63 - bits.LeadingZeros64(m) // from the last byte of the word down
			m &^= 1 << b
			if p := j - 8 + b/8; body[p] == c && matchAt(body, p-k, name) {
				return p - k
			}
		}
	}
	for p := j - 1; p >= 0; p-- {
		if body[p] == c && matchAt(body, p-k, name) {
			return p - k
		}
	}
	return -1
}

// matchAt reports whether name occurs in body at i.
func matchAt(body []byte, i int, name []byte) bool {
	return i >= 0 && len(body)-i >= len(name) && string(body[i:i+len(name)]) == string(name)
}

const ones, highs = 0x0101010101010101, 0x8080808080808080

// quoteOrEscape returns the index of the first '"' or '\\' at or after i in v, or len(v),
// looking at eight bytes at a time.
func quoteOrEscape(v []byte, i int) int {
	for ; i+8 <= len(v); i += 8 {
		w := binary.LittleEndian.Uint64(v[i : i+8 : i+8])
		// The lowest bit of each mask is exact, and so is the lowest of both.
		if m := zeroBytes(w^'"'*ones) | zeroBytes(w^'\\'*ones); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(v); i++ {
		if v[i] == '"' || v[i] == '\\' {
			return i
		}
	}
	return len(v)
}

// zeroBytes returns a mask with the high bit of every zero byte of w set; bytes above a
// zero byte may be set too (false positives, which callers check).
func zeroBytes(w uint64) uint64 { return (w - ones) &^ w & highs }

// readUsageMember reads the usage object that the body's last "usage" key holds.
func readUsageMember(body []byte) (llmclient.Usage, bool) {
	v, ok := memberValue(body, true, usageKey)
	if !ok {
		return llmclient.Usage{}, false
	}
	return usageObject(v)
}

// usageObject reads the usage object at the start of v (after white space), as both the
// typed answer (parseResponse) and the transport read it: one reading, so that they agree
// on every count, however the upstream writes it (jsonscan.Scanner.Count: a count that is
// not an integer never fails the answer, one that cannot be a count reads as -1, which the
// Client takes as no report). ok is false when v holds no object (null) or is malformed.
func usageObject(v []byte) (llmclient.Usage, bool) {
	if u, ok := plainChatUsage(v); ok {
		return u, true
	}
	var sc jsonscan.Scanner
	sc.Reset(v)
	if sc.Peek() != jsonscan.Object {
		return llmclient.Usage{}, false
	}
	u, ok := scanChatUsage(&sc)
	return u, ok && sc.Err() == nil
}

// plainChatUsage reads a usage object the way the vendors write it, without the scanner:
// members whose names have no escapes and whose values are integers of at most 18 digits,
// null, or (for the two details members) objects of such members. ok is false for
// anything else, which scanChatUsage then reads.
func plainChatUsage(v []byte) (llmclient.Usage, bool) {
	var p plainUsage
	i := skipSpace(v, 0)
	if i >= len(v) || v[i] != '{' {
		return llmclient.Usage{}, false
	}
	if _, ok := p.members(v, i+1, inUsage); !ok {
		return llmclient.Usage{}, false
	}
	out := p.u.usage()
	if p.cached > 0 {
		out.CachedInputTokens = p.cached
	}
	out.CacheWriteTokens = p.cacheWrite
	out.ReasoningTokens = p.reasoning
	return out, true
}

// The objects plainUsage reads members of.
const (
	inUsage = iota
	inPromptDetails
	inCompletionDetails
)

// plainUsage is what plainChatUsage has read so far.
type plainUsage struct {
	u                             ccUsage
	cached, cacheWrite, reasoning int
}

// members reads the members of an object whose opening brace ends before v[i], up to and
// past its closing brace, and returns the index after it; in says which object it is
// (inUsage, inPromptDetails, inCompletionDetails). ok is false for what plainChatUsage
// leaves to the scanner.
func (p *plainUsage) members(v []byte, i int, in int) (int, bool) {
	i = skipSpace(v, i)
	if i < len(v) && v[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(v) || v[i] != '"' {
			return i, false
		}
		id, k := knownKey(v, i+1)
		if id == keyOther {
			if k = quoteOrEscape(v, i+1); k == len(v) || v[k] != '"' {
				return i, false
			}
		}
		i = skipSpace(v, k+1)
		if i >= len(v) || v[i] != ':' {
			return i, false
		}
		i = skipSpace(v, i+1)
		if i >= len(v) {
			return i, false
		}
		switch c := v[i]; {
		case c == 'n':
			if len(v)-i < 4 || string(v[i:i+4]) != "null" {
				return i, false
			}
			i += 4
			p.set(id, 0, in) // as the scanner reads a null number
		case c == '{':
			obj := inPromptDetails
			switch {
			case in != inUsage:
				return i, false
			case id == keyCompletionDetails:
				obj = inCompletionDetails
			case id != keyPromptDetails:
				return i, false
			}
			var ok bool
			if i, ok = p.members(v, i+1, obj); !ok {
				return i, false
			}
		case c == '-' || c >= '0' && c <= '9':
			start := i
			if c == '-' {
				i++
			}
			digits := i
			var n int64
			for i < len(v) && v[i] >= '0' && v[i] <= '9' {
				n = n*10 + int64(v[i]-'0')
				i++
			}
			if i == digits || i-digits > 18 || v[digits] == '0' && i-digits > 1 ||
				i < len(v) && (v[i] == '.' || v[i] == 'e' || v[i] == 'E') {
				return start, false // not an integer the plain reader takes: the scanner decides
			}
			if in == inUsage && (id == keyPromptDetails || id == keyCompletionDetails) {
				return start, false
			}
			if c == '-' {
				n = -n
			}
			p.set(id, int(n), in)
		default:
			return i, false
		}
		i = skipSpace(v, i)
		if i >= len(v) {
			return i, false
		}
		switch v[i] {
		case ',':
			i = skipSpace(v, i+1)
		case '}':
			return i + 1, true
		default:
			return i, false
		}
	}
}

// The member names plainUsage reads, as keyOf identifies them.
const (
	keyOther = iota
	keyPrompt
	keyCompletion
	keyTotal
	keyCacheHit
	keyPromptDetails
	keyCompletionDetails
	keyCached
	keyCacheWrite
	keyReasoning
)

// knownKey identifies the member name that starts at v[i] (after its opening quote) when
// it is one plainUsage reads, followed by its closing quote, and returns the index of that
// quote; keyOther and i for any other name. The name's first eight bytes pick the
// candidate, so that a name the vendors write is told in a comparison or two; keyOf
// decides, as for any name, on the whole of it.
func knownKey(v []byte, i int) (int, int) {
	if len(v)-i < 13 { // the shortest name and its quote
		return keyOther, i
	}
	var n int
	switch binary.LittleEndian.Uint64(v[i:]) {
	case word8("total_to"):
		n = len("total_tokens")
	case word8("prompt_t"):
		n = len("prompt_tokens")
		if len(v)-i > len("prompt_tokens_details") && v[i+n] == '_' {
			n = len("prompt_tokens_details")
		}
	case word8("cached_t"):
		n = len("cached_tokens")
	case word8("cache_wr"):
		n = len("cache_write_tokens")
	case word8("reasonin"):
		n = len("reasoning_tokens")
	case word8("completi"):
		n = len("completion_tokens")
		if len(v)-i > len("completion_tokens_details") && v[i+n] == '_' {
			n = len("completion_tokens_details")
		}
	case word8("prompt_c"):
		n = len("prompt_cache_hit_tokens")
	default:
		return keyOther, i
	}
	if len(v)-i <= n || v[i+n] != '"' {
		return keyOther, i
	}
	return keyOf(v[i : i+n]), i + n
}

// word8 is the first eight bytes of s, little-endian: a constant for a constant s.
func word8(s string) uint64 {
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// keyOf identifies a member name of a usage object or of its details objects: by its
// length first, so that most names are told apart by one comparison.
func keyOf(k []byte) int {
	switch len(k) {
	case 12:
		if string(k) == "total_tokens" {
			return keyTotal
		}
	case 13:
		switch string(k) {
		case "prompt_tokens":
			return keyPrompt
		case "cached_tokens":
			return keyCached
		}
	case 16:
		if string(k) == "reasoning_tokens" {
			return keyReasoning
		}
	case 17:
		if string(k) == "completion_tokens" {
			return keyCompletion
		}
	case 18:
		if string(k) == "cache_write_tokens" {
			return keyCacheWrite
		}
	case 21:
		if string(k) == "prompt_tokens_details" {
			return keyPromptDetails
		}
	case 23:
		if string(k) == "prompt_cache_hit_tokens" {
			return keyCacheHit
		}
	case 25:
		if string(k) == "completion_tokens_details" {
			return keyCompletionDetails
		}
	}
	return keyOther
}

// set keeps an integer member of the object in (see members).
func (p *plainUsage) set(id int, n int, in int) {
	switch in {
	case inPromptDetails:
		switch id {
		case keyCached:
			p.cached = n
		case keyCacheWrite:
			p.cacheWrite = n
		}
		return
	case inCompletionDetails:
		if id == keyReasoning {
			p.reasoning = n
		}
		return
	}
	switch id {
	case keyPrompt:
		p.u.PromptTokens = n
	case keyCompletion:
		p.u.CompletionTokens = n
	case keyTotal:
		p.u.TotalTokens = n
	case keyCacheHit:
		p.u.PromptCacheHitTokens = n
	}
}

// skipSpace returns the index of the first byte at or after i that is not JSON white space.
func skipSpace(v []byte, i int) int {
	for i < len(v) && v[i] <= ' ' && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r') {
		i++
	}
	return i
}

// readChatUsageScan reads model and usage scanning the whole body.
func readChatUsageScan(body []byte) (llmclient.Usage, string, bool) {
	var sc jsonscan.Scanner
	sc.Reset(body)
	var model string
	var u llmclient.Usage
	found := false
	for more := sc.Object(); more; more = sc.More() {
		switch string(sc.Key()) {
		case "model":
			model = string(sc.Str())
		case "usage":
			found = !sc.Null()
			if found {
				u, found = scanChatUsage(&sc)
			}
		default:
			sc.Skip()
		}
	}
	sc.End()
	if sc.Err() != nil || !found {
		return llmclient.Usage{}, "", false
	}
	return u, model, true
}

// scanChatUsage reads a Chat Completions usage object, as ccUsage.usage converts it; its
// counts by jsonscan.Scanner.Count.
func scanChatUsage(sc *jsonscan.Scanner) (llmclient.Usage, bool) {
	var u ccUsage
	var cached, cacheWrite, reasoning int
	// details reads the counts named key and key2 (when into2 is not nil) of a details
	// object.
	details := func(key string, into *int, key2 string, into2 *int) {
		if sc.Null() {
			return
		}
		for more := sc.Object(); more; more = sc.More() {
			switch k := string(sc.Key()); {
			case k == key:
				*into = sc.Count()
			case into2 != nil && k == key2:
				*into2 = sc.Count()
			default:
				sc.Skip()
			}
		}
	}
	for m := sc.Object(); m; m = sc.More() {
		switch string(sc.Key()) {
		case "prompt_tokens":
			u.PromptTokens = sc.Count()
		case "completion_tokens":
			u.CompletionTokens = sc.Count()
		case "total_tokens":
			u.TotalTokens = sc.Count()
		case "prompt_cache_hit_tokens":
			u.PromptCacheHitTokens = sc.Count()
		case "prompt_tokens_details":
			details("cached_tokens", &cached, "cache_write_tokens", &cacheWrite)
		case "completion_tokens_details":
			details("reasoning_tokens", &reasoning, "", nil)
		default:
			sc.Skip()
		}
	}
	out := u.usage()
	if cached > 0 {
		out.CachedInputTokens = cached
	}
	out.CacheWriteTokens = cacheWrite
	out.ReasoningTokens = reasoning
	return out, sc.Err() == nil
}

var _ llmclient.UsageReader = (*Provider)(nil)
