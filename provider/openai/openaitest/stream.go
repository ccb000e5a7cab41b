// Package openaitest generates OpenAI wire data for tests and benchmarks, so that the
// adapter's own benchmarks and the comparison benchmarks in the nested bench module decode
// exactly the same bytes.
package openaitest

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// streamTokens are the content deltas the generated stream cycles through: short words, as
// real tokens are, with some JSON escapes and non-ASCII text among them.
var streamTokens = []string{
	" The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".",
	"\n\n", " It", " said", ": \"", "hello", "\"", " café", " naïve", " 🦊", " –", " and",
	" then", " ran", " away", ",", " fast", "!", "\t", " Done", " \\o/",
}

// ChatStream generates a Chat Completions event stream of n data events followed by
// data: [DONE], in the exact shape OpenAI sends with stream_options.include_usage:
//
//	event 1:        role chunk  {"id":…,"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}
//	events 2..n-2:  content chunks, delta {"content":TOKEN}, TOKEN cycling through streamTokens
//	event n-1:      finish chunk, delta {} and "finish_reason":"stop"
//	event n:        usage chunk, "choices":[] and a full usage object
//
// Every chunk carries "id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", "object",
// "created":1741569952, "model":"gpt-4o-2024-08-06", "service_tier":"default" and
// "system_fingerprint":"fp_eb9dce56a8"; each event is "data: {json}\n\n". For n = 20000 the
// stream is about 5.2 MB.
func ChatStream(n int) []byte {
	const head = `{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[`
	var b bytes.Buffer
	event := func(choices, usage string) {
		b.WriteString("data: ")
		b.WriteString(head)
		b.WriteString(choices)
		b.WriteString(`],"usage":`)
		b.WriteString(usage)
		b.WriteString("}\n\n")
	}
	event(`{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}`, "null")
	for i := 0; i < n-3; i++ {
		tok, _ := json.Marshal(streamTokens[i%len(streamTokens)])
		event(`{"index":0,"delta":{"content":`+string(tok)+`},"logprobs":null,"finish_reason":null}`, "null")
	}
	event(`{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}`, "null")
	b.WriteString("data: " + head + `],"usage":{"prompt_tokens":1117,"completion_tokens":` + strconv.Itoa(n-3) +
		`,"total_tokens":` + strconv.Itoa(n-3+1117) + `,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},` +
		`"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}
