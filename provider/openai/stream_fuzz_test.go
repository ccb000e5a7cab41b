package openai

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
	"testing/iotest"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
)

// FuzzChunkStream feeds arbitrary bodies to the stream decoder: it must not panic, must end
// after a bounded number of Recv calls with io.EOF only after [DONE] or a finish reason, must keep its error,
// and must decode the same chunks however the body is split into reads.
func FuzzChunkStream(f *testing.F) {
	f.Add([]byte(ev(roleChunk) + ev(helloChunk) + ev(worldChunk) + ev(stopChunk) + ev(usageChunk) + done))
	f.Add([]byte(ev(azureFilter) + ev(azureContent) + ev(azureEndCF) + ev(azureStop) + done))
	f.Add([]byte(": keep-alive\r\n\r\n" + ev(helloChunk) + ev(`{"error":{"message":"x","type":"server_error"}}`)))
	f.Add([]byte(ev(`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a\":1}"}}]}}]}`) + done))
	f.Add([]byte(ev(`{"choices":[{"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"t"}]}]}}]}`)))
	f.Add([]byte("event: error\ndata: {}\n\n"))
	f.Add([]byte(ev(`{"choices":[{"delta":{"content":"\ud83d\ude00\u00"}}]}`)))
	f.Add([]byte(ev(helloChunk) + ev(`{"choices":[],"usage":{"prompt_tokens":5.7,"completion_tokens":-1e18,"total_tokens":"x","prompt_tokens_details":{"cached_tokens":1e400}}}`) + done))
	f.Fuzz(func(t *testing.T, body []byte) {
		whole, wholeErr := fuzzDecode(t, bytes.NewReader(body), len(body))
		split, splitErr := fuzzDecode(t, iotest.OneByteReader(bytes.NewReader(body)), len(body))
		if !reflect.DeepEqual(whole, split) {
			t.Fatalf("chunks depend on read sizes:\n%+v\n%+v", whole, split)
		}
		if wholeErr.Error() != splitErr.Error() {
			t.Fatalf("errors depend on read sizes: %v / %v", wholeErr, splitErr)
		}
		if wholeErr == io.EOF && !bytes.Contains(body, []byte("[DONE]")) && !finished(whole) {
			t.Fatal("clean EOF without [DONE] or a finish reason")
		}
	})
}

// finished reports whether any chunk carried a finish reason.
func finished(chunks []llmclient.Chunk) bool {
	for _, c := range chunks {
		if c.FinishReason != finish.None {
			return true
		}
	}
	return false
}

func fuzzDecode(t *testing.T, r io.Reader, size int) ([]llmclient.Chunk, error) {
	s := streamOf(r)
	defer s.Close()
	var out []llmclient.Chunk
	for i := 0; ; i++ {
		c, err := s.Recv()
		if err != nil {
			if _, again := s.Recv(); again != err {
				t.Fatalf("error not sticky: %v then %v", err, again)
			}
			if err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF) && llmclient.ClassOf(err) == failure.Unknown {
				t.Fatalf("unclassifiable error %v", err)
			}
			return out, err
		}
		if i > size {
			t.Fatalf("%d chunks from %d bytes", i, size)
		}
		if n := len(c.Text) + len(c.Reasoning) + len(c.Refusal); n > size {
			t.Fatalf("chunk holds %d bytes of text from a %d-byte body", n, size)
		}
		out = append(out, c)
	}
}
