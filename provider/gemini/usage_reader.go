package gemini

import (
	"encoding/json"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
)

// ReadUsage reads the usage and model version of a one-shot generateContent body
// (llmclient.UsageReader), for the transport's pricing; ok is false for other shapes and
// for a body without usageMetadata.
func (p *Provider) ReadUsage(shape dialect.Shape, body []byte) (llmclient.Usage, string, bool) {
	if shape != ShapeGenerateContent {
		return llmclient.Usage{}, "", false
	}
	var r struct {
		UsageMetadata *wireUsage `json:"usageMetadata"`
		ModelVersion  string     `json:"modelVersion"`
	}
	if json.Unmarshal(body, &r) != nil || r.UsageMetadata == nil {
		return llmclient.Usage{}, "", false
	}
	return usage(r.UsageMetadata), r.ModelVersion, true
}

var _ llmclient.UsageReader = (*Provider)(nil)
