package anthropic

import (
	"github.com/llmclient/llmclient/dialect"
)

// ShapeMessages is the Anthropic dialect's POST /v1/messages.
const ShapeMessages dialect.Shape = "anthropic.messages"
