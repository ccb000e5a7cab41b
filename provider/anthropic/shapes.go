package anthropic

import "github.com/llmclient/llmclient"

// ShapeMessages is the Anthropic dialect's POST /v1/messages.
const ShapeMessages llmclient.Shape = "anthropic.messages"
