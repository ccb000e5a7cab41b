package gemini

import (
	"github.com/llmclient/llmclient/dialect"
)

// The generateContent shapes of the Gemini dialect.
const (
	// ShapeGenerateContent is POST …/models/{model}:generateContent.
	ShapeGenerateContent dialect.Shape = "gemini.generate_content"
	// ShapeStreamGenerateContent is POST …/models/{model}:streamGenerateContent.
	ShapeStreamGenerateContent dialect.Shape = "gemini.stream_generate_content"
)
