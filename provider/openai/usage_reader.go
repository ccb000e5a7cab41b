package openai

import (
	"bytes"
	"encoding/json"
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

// readChatUsage reads a Chat Completions body's model and usage with the scanner, as the
// transport does for every one-shot answer under a token limit: no allocation but the
// model's name. The vendors put "usage" last and "model" first: they are looked up there,
// and the whole body is scanned only when that fails.
func readChatUsage(body []byte) (llmclient.Usage, string, bool) {
	if u, ok := readUsageMember(body); ok {
		var model string
		if v, ok := memberValue(body, false, modelKey); ok {
			var sc jsonscan.Scanner
			sc.Reset(v)
			if sc.Peek() == jsonscan.String {
				model = modelName(sc.Str())
			}
		}
		return u, model, true
	}
	return readChatUsageScan(body)
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

// lastIndex returns the index of name's last occurrence in body, or -1; name begins and
// ends with a quote. It looks from the end, at the quotes only: the usage object that the
// vendors write last is a few dozen bytes from the end of however long a body.
func lastIndex(body []byte, name []byte) int {
	n := len(name)
	for j := len(body); ; {
		q := bytes.LastIndexByte(body[:j], '"') // the candidate's closing quote
		i := q + 1 - n
		if i < 0 {
			return -1
		}
		if body[i] == '"' && body[q-1] == name[n-2] && string(body[i:q+1]) == string(name) {
			return i
		}
		j = q
	}
}

// readUsageMember reads the usage object that the body's last "usage" key holds.
func readUsageMember(body []byte) (llmclient.Usage, bool) {
	v, ok := memberValue(body, true, usageKey)
	if !ok {
		return llmclient.Usage{}, false
	}
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
	u                 ccUsage
	cached, reasoning int
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
		k := bytes.IndexByte(v[i+1:], '"')
		if k < 0 {
			return i, false
		}
		k += i + 1
		key := v[i+1 : k]
		if bytes.IndexByte(key, '\\') >= 0 {
			return i, false
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
			p.set(key, 0, in) // as the scanner reads a null number
		case c == '{':
			obj := inPromptDetails
			switch {
			case in != inUsage:
				return i, false
			case string(key) == "completion_tokens_details":
				obj = inCompletionDetails
			case string(key) != "prompt_tokens_details":
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
			if in == inUsage && (string(key) == "prompt_tokens_details" || string(key) == "completion_tokens_details") {
				return start, false
			}
			if c == '-' {
				n = -n
			}
			p.set(key, int(n), in)
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

// set keeps an integer member of the object in (see members).
func (p *plainUsage) set(key []byte, n int, in int) {
	switch in {
	case inPromptDetails:
		if string(key) == "cached_tokens" {
			p.cached = n
		}
		return
	case inCompletionDetails:
		if string(key) == "reasoning_tokens" {
			p.reasoning = n
		}
		return
	}
	switch string(key) {
	case "prompt_tokens":
		p.u.PromptTokens = n
	case "completion_tokens":
		p.u.CompletionTokens = n
	case "total_tokens":
		p.u.TotalTokens = n
	case "prompt_cache_hit_tokens":
		p.u.PromptCacheHitTokens = n
	}
}

// skipSpace returns the index of the first byte at or after i that is not JSON white space.
func skipSpace(v []byte, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r') {
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

// scanChatUsage reads a Chat Completions usage object, as ccUsage.usage converts it.
func scanChatUsage(sc *jsonscan.Scanner) (llmclient.Usage, bool) {
	var u ccUsage
	var cached, reasoning int
	details := func(key string, into *int) {
		if sc.Null() {
			return
		}
		for more := sc.Object(); more; more = sc.More() {
			if string(sc.Key()) == key {
				*into = int(sc.Int())
			} else {
				sc.Skip()
			}
		}
	}
	for m := sc.Object(); m; m = sc.More() {
		switch string(sc.Key()) {
		case "prompt_tokens":
			u.PromptTokens = int(sc.Int())
		case "completion_tokens":
			u.CompletionTokens = int(sc.Int())
		case "total_tokens":
			u.TotalTokens = int(sc.Int())
		case "prompt_cache_hit_tokens":
			u.PromptCacheHitTokens = int(sc.Int())
		case "prompt_tokens_details":
			details("cached_tokens", &cached)
		case "completion_tokens_details":
			details("reasoning_tokens", &reasoning)
		default:
			sc.Skip()
		}
	}
	out := u.usage()
	if cached > 0 {
		out.CachedInputTokens = cached
	}
	out.ReasoningTokens = reasoning
	return out, sc.Err() == nil
}

var _ llmclient.UsageReader = (*Provider)(nil)
