package cache

import (
	"context"
	"fmt"
	"slices"

	"github.com/llmclient/llmclient"
)

// Embedder turns texts into embedding vectors, one per text, in order. The semantic cache
// embeds one question per call. ClientEmbedder serves it with llmclient.Client.Embed;
// EmbedderFunc adapts any other embedding client. Implementations must be safe for
// concurrent use.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// EmbedderFunc adapts a function to an Embedder.
type EmbedderFunc func(ctx context.Context, texts []string) ([][]float32, error)

// Embed calls f.
func (f EmbedderFunc) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return f(ctx, texts)
}

// EmbedClient is what ClientEmbedder embeds with: *llmclient.Client implements it.
type EmbedClient interface {
	Embed(ctx context.Context, req *llmclient.EmbedRequest) (*llmclient.EmbedResponse, error)
}

// ClientEmbedder returns an Embedder that embeds through c, a *llmclient.Client: with its
// limiter, retries, breakers and failover across the embedding upstreams of
// template.Model. Each call sends a copy of template (Model, Dimensions, TaskType,
// Metadata, Priority, Extra, Concurrency) with Input set to the texts, under the caller's
// context, so CallOptions and the caller's partition apply. A task type made for
// comparing questions ("SEMANTIC_SIMILARITY" or "RETRIEVAL_QUERY" for Gemini) suits the
// semantic cache. An answer that is not one vector per text is an error.
//
//	sem, _ := cache.NewSemantic(cache.ClientEmbedder(client, llmclient.EmbedRequest{Model: "text-embedding-3-small"}))
//
// The Client that serves the embeddings may be the one whose calls the semantic cache
// serves, created after the cache: ClientEmbedder only keeps c and calls it later.
func ClientEmbedder(c EmbedClient, template llmclient.EmbedRequest) Embedder {
	template.Input = nil
	return EmbedderFunc(func(ctx context.Context, texts []string) ([][]float32, error) {
		req := template
		req.Input = slices.Clone(texts)
		resp, err := c.Embed(ctx, &req)
		if err != nil {
			return nil, err
		}
		if len(resp.Vectors) != len(texts) {
			return nil, fmt.Errorf("llmclient/cache: Embed returned %d vectors for %d texts", len(resp.Vectors), len(texts))
		}
		return resp.Vectors, nil
	})
}
