package openai

import (
	"encoding/json"

	"github.com/llmclient/llmclient"
)

// ReadUsage reads the usage and model of a one-shot Chat Completions or Responses body
// (llmclient.UsageReader), for the transport's pricing; ok is false for other shapes and
// for a body without a usage object.
func (p *Provider) ReadUsage(shape llmclient.Shape, body []byte) (llmclient.Usage, string, bool) {
	switch shape {
	case ShapeChatCompletions:
		var r struct {
			Model string   `json:"model"`
			Usage *ccUsage `json:"usage"`
		}
		if json.Unmarshal(body, &r) != nil || r.Usage == nil {
			return llmclient.Usage{}, "", false
		}
		return r.Usage.usage(), r.Model, true
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

var _ llmclient.UsageReader = (*Provider)(nil)
