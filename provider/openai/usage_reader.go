package openai

import (
	"encoding/json"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/jsonscan"
)

// ReadUsage reads the usage and model of a one-shot Chat Completions or Responses body
// (llmclient.UsageReader), for the transport's pricing; ok is false for other shapes and
// for a body without a usage object.
func (p *Provider) ReadUsage(shape llmclient.Shape, body []byte) (llmclient.Usage, string, bool) {
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
// model's name.
func readChatUsage(body []byte) (llmclient.Usage, string, bool) {
	var sc jsonscan.Scanner
	sc.Reset(body)
	var model string
	var u struct {
		ccUsage
		cached, reasoning int
	}
	found := false
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
	for more := sc.Object(); more; more = sc.More() {
		switch string(sc.Key()) {
		case "model":
			model = string(sc.Str())
		case "usage":
			found = !sc.Null()
			if !found {
				continue
			}
			u.ccUsage = ccUsage{}
			var cached, reasoning int
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
			u.cached, u.reasoning = cached, reasoning
		default:
			sc.Skip()
		}
	}
	sc.End()
	if sc.Err() != nil || !found {
		return llmclient.Usage{}, "", false
	}
	out := u.usage() // as ccUsage.usage, with the details read in place
	if u.cached > 0 {
		out.CachedInputTokens = u.cached
	}
	out.ReasoningTokens = u.reasoning
	return out, model, true
}

var _ llmclient.UsageReader = (*Provider)(nil)
