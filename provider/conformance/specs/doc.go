// Package specs checks the request bodies llmclient's adapters send against the vendors'
// published OpenAPI descriptions. It is a test-only module (its own go.mod), so that the
// JSON Schema validator and the YAML reader it needs stay out of the core module.
//
// The tests validate, with a JSON Schema 2020-12 validator, the request schema of the
// operation each body is for (OpenAI POST /chat/completions, /responses and /embeddings;
// Anthropic POST /v1/messages; Gemini generateContent, streamGenerateContent,
// embedContent and batchEmbedContents):
//
//   - every golden request body of every adapter (provider/*/testdata);
//   - cross-vendor conversations (a system prompt, tools, tool calls and results whose ids
//     come from another vendor, images in every position, an out-of-range temperature and
//     five stop sequences) rendered by each adapter, which must either send a body the
//     spec accepts or refuse the call locally with an error wrapping
//     llmclient.ErrUnsupported;
//   - the vendor rules a schema does not state or a validator misses (Anthropic's tool id
//     pattern, OpenAI's four stop sequences and 40-character tool call ids, sampling
//     ranges, tool results that answer a call of the turn before).
//
// The spec files are verbatim copies in testdata (see testdata/README.md for their
// provenance and the fixes applied when they are loaded).
package specs
