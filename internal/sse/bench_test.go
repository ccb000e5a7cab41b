package sse_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/llmclient/llmclient/internal/sse"
)

func BenchmarkDecoder(b *testing.B) {
	const events = 10_000
	in := []byte(strings.Repeat(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"hello"},"finish_reason":null}]}`+"\n\n", events))
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	r := bytes.NewReader(in)
	for b.Loop() {
		r.Reset(in)
		d := sse.NewDecoder(r, 0)
		for {
			if _, err := d.Next(); err != nil {
				break
			}
		}
	}
}
