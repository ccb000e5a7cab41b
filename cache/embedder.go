package cache

import "context"

// Embedder turns texts into embedding vectors, one per text, in order. The semantic cache
// embeds one question per call. Client.Embed will serve it through an adapter once it
// exists; until then wrap any embedding client with EmbedderFunc. Implementations must be
// safe for concurrent use.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// EmbedderFunc adapts a function to an Embedder.
type EmbedderFunc func(ctx context.Context, texts []string) ([][]float32, error)

// Embed calls f.
func (f EmbedderFunc) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return f(ctx, texts)
}
