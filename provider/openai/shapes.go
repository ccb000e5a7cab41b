package openai

import (
	"github.com/llmclient/llmclient/dialect"
)

// The shapes of the OpenAI dialect.
const (
	// ShapeChatCompletions is POST /chat/completions (and Azure's deployment path).
	ShapeChatCompletions dialect.Shape = "openai.chat_completions"
	// ShapeResponses is POST /responses.
	ShapeResponses dialect.Shape = "openai.responses"
	// ShapeEmbeddings is POST /embeddings.
	ShapeEmbeddings dialect.Shape = "openai.embeddings"
)
