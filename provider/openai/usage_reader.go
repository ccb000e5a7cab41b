package openai

import (
	"bytes"
	"encoding/json"

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
		if v, ok := memberValue(body, false, `"model"`); ok {
			var sc jsonscan.Scanner
			sc.Reset(v)
			if sc.Peek() == jsonscan.String {
				model = string(sc.Str())
			}
		}
		return u, model, true
	}
	return readChatUsageScan(body)
}

// memberValue returns what follows the colon after name's first (or last) occurrence as a
// key: name with an unescaped opening quote, then a colon.
func memberValue(body []byte, last bool, name string) ([]byte, bool) {
	i := bytes.Index(body, []byte(name))
	for last && i >= 0 { // forward searches: bytes.Index is vectorized, LastIndex is not
		k := bytes.Index(body[i+len(name):], []byte(name))
		if k < 0 {
			break
		}
		i += len(name) + k
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

// readUsageMember reads the usage object that the body's last "usage" key holds.
func readUsageMember(body []byte) (llmclient.Usage, bool) {
	v, ok := memberValue(body, true, `"usage"`)
	if !ok {
		return llmclient.Usage{}, false
	}
	var sc jsonscan.Scanner
	sc.Reset(v)
	if sc.Peek() != jsonscan.Object {
		return llmclient.Usage{}, false
	}
	u, ok := scanChatUsage(&sc)
	return u, ok && sc.Err() == nil
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
