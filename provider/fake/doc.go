// Package fake provides a scripted llmclient.Provider for unit tests: yours and ours.
//
// A Provider plays a script of steps, one step per call to Complete or Stream, in order,
// and records every call it receives:
//
//	p := fake.New(
//		fake.Fail(429).RetryAfter(2*time.Second).Code("rate_limit_exceeded"),
//		fake.Fail(503).Times(2),
//		fake.Reply("hello").Latency(300*time.Millisecond),
//	)
//	// call 1: *llmclient.Error{Class: ClassRateLimited, Status: 429, RetryAfter: 2s, ...}
//	// calls 2, 3: *llmclient.Error{Class: ClassOverloaded, Status: 503}
//	// call 4: after 300ms, a Response with Text "hello"
//	// call 5: an error wrapping ErrExhausted: "fake: script exhausted after 4 calls"
//	p.Calls()    // 5
//	p.Requests() // what each call carried: model, API key, a copy of the request, time
//
// # Steps
//
//   - Reply: a successful answer, with text, reasoning, tool calls, finish reason, usage.
//   - Stream, StreamChunks: a streamed answer, with a stall before the first token,
//     delays between chunks, keep-alives, and a cut connection or an in-band error event
//     after k chunks.
//   - Fail, FailClass: a vendor error response, as the *llmclient.Error a dialect builds,
//     with status, class, code, Retry-After, x-should-retry and rate limits.
//   - Error: a transport error such as a reset connection, returned as it is.
//   - Func: a step chosen per call, for example by call.APIKey.
//   - Embedding: an answer to Embed (the Provider is an llmclient.Embedder), with
//     deterministic unit vectors per text (see Vector), or fixed ones; Fail and Error
//     steps fail Embed calls too. MaxEmbedBatch is DefaultMaxEmbedBatch unless
//     SetMaxEmbedBatch changes it.
//
// Each step serves one call unless Times(n) or Forever says otherwise. Repeat(n, steps...)
// plays a sequence n times, and Loop(steps...) plays it forever; groups nest, so
// fake.New(fake.Loop(fake.Fail(503), fake.Reply("ok"))) alternates for as long as it is
// called. Once a script is spent, each further call fails with an *llmclient.Error of class
// ClassUnknown wrapping ErrExhausted ("fake: script exhausted after N calls"), so a test
// whose code calls more often than expected notices. Remaining tells how many calls the
// script has left and Reset rewinds it.
//
// Any step can be played by either method. A Reply played by Stream streams its content as
// one chunk; a Stream step played by Complete is read to its end and returns the
// concatenated text, or the stream's error. A Fail or Error step played by Stream fails
// Stream itself, as a non-2xx status does before any body.
//
// # Usage
//
// A Reply or Stream step without Usage reports about one token per four bytes: of the
// request's message text as input, and of the answer's text, reasoning, refusal and tool
// calls as output. That gives a limiter real numbers to reconcile; set Usage for exact ones.
//
// # Time
//
// Every wait (Latency, stalls, chunk delays, keep-alives) is a timer raced against the
// call's context and, for streams, against Close; nothing runs in the background. Inside a
// testing/synctest bubble, waits take no real time:
//
//	synctest.Test(t, func(t *testing.T) {
//		p := fake.New(fake.Stream("Hel", "lo").StallFirst(30 * time.Second).KeepAlive(5 * time.Second))
//		// Recv returns five keep-alive chunks, then "Hel" at 30s of virtual time, ...
//	})
//
// A wait cut short by the context returns an error wrapping the context's error (and its
// cause), and the interrupted call has used its step; a call whose context is already done
// on arrival is recorded but takes no step. A stream's Recv after Close returns ErrClosed.
package fake
