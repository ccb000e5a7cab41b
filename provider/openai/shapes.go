package openai

import "github.com/llmclient/llmclient"

// The shapes of the OpenAI dialect.
const (
	// ShapeChatCompletions is POST /chat/completions (and Azure's deployment path).
	ShapeChatCompletions llmclient.Shape = "openai.chat_completions"
	// ShapeResponses is POST /responses.
	ShapeResponses llmclient.Shape = "openai.responses"
	// ShapeEmbeddings is POST /embeddings.
	ShapeEmbeddings llmclient.Shape = "openai.embeddings"
)
