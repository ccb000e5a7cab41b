package anthropic

import (
	"encoding/json"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
)

// ReadUsage reads the usage and model of a one-shot Messages body
// (llmclient.UsageReader), for the transport's pricing; ok is false for other shapes and
// for a body without a usage object.
func (p *Provider) ReadUsage(shape dialect.Shape, body []byte) (llmclient.Usage, string, bool) {
	if shape != ShapeMessages {
		return llmclient.Usage{}, "", false
	}
	var r struct {
		Model string     `json:"model"`
		Usage *wireUsage `json:"usage"`
	}
	if json.Unmarshal(body, &r) != nil || r.Usage == nil {
		return llmclient.Usage{}, "", false
	}
	return usage(*r.Usage, nil), r.Model, true
}

var _ llmclient.UsageReader = (*Provider)(nil)
