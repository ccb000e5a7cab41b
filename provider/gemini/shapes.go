package gemini

import "github.com/llmclient/llmclient"

// The generateContent shapes of the Gemini dialect.
const (
	// ShapeGenerateContent is POST …/models/{model}:generateContent.
	ShapeGenerateContent llmclient.Shape = "gemini.generate_content"
	// ShapeStreamGenerateContent is POST …/models/{model}:streamGenerateContent.
	ShapeStreamGenerateContent llmclient.Shape = "gemini.stream_generate_content"
)
