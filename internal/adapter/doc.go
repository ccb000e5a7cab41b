// Package adapter holds the llmclient-aware plumbing shared by the vendor adapters in
// provider/…: sending a request and turning a non-2xx answer into a classified, redacted
// *llmclient.Error, reading a bounded response body, and the errors every adapter makes
// (bad request, malformed response, transport failure). Vendor logic — wire formats,
// error classification, headers — stays in each adapter.
//
// The root package must not import this package (it imports llmclient). Everything here
// is safe for concurrent use.
package adapter
