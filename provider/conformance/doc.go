// Package conformance is a test kit that proves an llmclient.Provider adapter keeps the
// contract every adapter shares: the same scenarios, run against every adapter, each
// against an upstream that speaks that vendor's documented wire format. A new adapter
// proves itself by passing it. Like net/http/httptest, it is meant to be imported from
// tests only.
//
// # The table
//
// Scenarios returns one vendor-neutral table: a text answer, a max-tokens answer, a
// tool-call round trip (the returned calls and one result each are sent back, and the
// upstream checks they arrive linked), a filtered answer, a stream with usage, a stream
// with an error event before and after its first token, a stream cut before and after
// its first token, and every failure Kind (rate limit with a Retry-After header or a body
// hint, quota, billing, overload, server error, timeout, bad request, context length,
// blocked prompt, auth, permission, not found), each one-shot and streaming. A Scenario
// says what the caller sends (an llmclient.Request), what the upstream answers (a Reply)
// and what must come out (a Want: text, tool calls, finish reason, usage, chunk texts, or
// a class with its Retry-After and where in the stream it surfaces). The expected Status
// is the one the upstream sent.
//
// # Modes
//
// Run runs each scenario as subtests "<scenario>/<mode>":
//
//	provider            the adapter directly
//	client              an llmclient.Client with WithMaxAttempts(1): classes are observed
//	                    as they are (a filtered answer becomes a content_filtered error, an
//	                    error after the first token a stream_interrupted one with Partial);
//	                    the adapter uses its own key
//	client_retry        a Client with the default retry policy, failure scenarios only,
//	                    with a good reply scripted after the failure: retryable classes
//	                    must be retried after their Retry-After (or a backoff) and succeed,
//	                    the others must not be retried; runs in a testing/synctest bubble,
//	                    so a 2s Retry-After takes no real time; the key comes from a pool
//	loopback_provider,  provider and client again over a real httptest.Server on
//	loopback_client     127.0.0.1, for the scenarios marked Loopback
//
// Every other mode uses an in-memory http.RoundTripper that returns the same bytes a
// server would: it is deterministic, leak-free and, unlike a network server, works inside
// a synctest bubble (a server's goroutines would live outside it). Every case also checks
// what the upstream received (model, credential, stream flag, declared tools), that the
// adapter closed every response body, and that no error text contains the API key.
//
// # Adding an adapter
//
// An adapter that speaks HTTP implements Wire, in its own test file:
//
//   - NewProvider builds the adapter pointed at a base URL (a server root; add the path
//     prefix your base-URL option expects, such as "/v1"), with the given *http.Client
//     (pass it to your WithHTTPClient option) and API key.
//   - Decode checks that a request is in your vendor's shape (method, path, credential
//     header, body) and reports what it carried as a Seen.
//   - Render turns each Reply into your vendor's documented response: status, headers
//     and JSON body, or the event stream when the request asked for one, with the error
//     event or the missing end marker the Reply's End asks for. Echo the request's key in
//     your KindAuth message, as a careless vendor might, to prove that you redact it.
//     Return NotApplicable(why) for what your vendor cannot send; the scenario is skipped
//     with that reason. JSON and SSE build the common shapes.
//
// Then run the suite from a test:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Target{Name: "myvendor", Wire: myWire{}})
//	}
//
// An adapter that makes no HTTP calls (provider/fake) implements Script instead: it
// reports the status each Reply stands for and builds a Provider that takes each call's
// Reply from the serve function Run gives it.
//
// # Embeddings and conversations across vendors
//
// RunEmbed runs the embeddings table (EmbedScenarios: one input, a batch, dimensions,
// and the failures an embedding call meets) against a target whose Provider is an
// llmclient.Embedder, in the same modes as Run: the adapter directly, through
// llmclient.Client.Embed with one attempt and with the default retry policy, in memory
// and over loopback; the target's Embed (an EmbedWire) decodes the requests and renders
// the vectors, its Wire renders the failures.
//
// RunConversation takes several Wire targets and, for every ordered pair (A, B), begins a
// conversation on A (system prompt, tool, an image), continues it on B with A's tool calls
// and their results (one with an image), and returns to A: each upstream must receive the
// whole conversation in its own documented shape (the Wire's Decode rejects what its
// vendor would), and a vendor that SignsToolCalls must get its signature back. For these
// checks, a Wire's Decode fills Seen.System, Seen.Images and Seen.Signatures.
//
// When an adapter fails a case because of a bug that cannot be fixed at once, list the
// case in Target.KnownGaps with the reason: the case is then skipped with a log line, and
// Run fails as soon as it passes again, so the list cannot go stale. A package that uses
// the kit should verify goroutine leaks in its TestMain (go.uber.org/goleak).
package conformance
