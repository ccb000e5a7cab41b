package openai

import (
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/jsonscan"
)

// scannedUsage reads a usage object with the scanner, as readUsageMember falls back to.
func scannedUsage(v []byte) (llmclient.Usage, bool) {
	var sc jsonscan.Scanner
	sc.Reset(v)
	if sc.Peek() != jsonscan.Object {
		return llmclient.Usage{}, false
	}
	u, ok := scanChatUsage(&sc)
	return u, ok && sc.Err() == nil
}

// The plain reader gives what the scanner gives for every usage object it reads, and
// leaves to the scanner what it does not read plainly.
func TestPlainChatUsage(t *testing.T) {
	for _, tc := range []struct {
		body  string
		plain bool
	}{
		{`{"prompt_tokens":25,"completion_tokens":4,"total_tokens":29}`, true},
		{` { "prompt_tokens" : 25 , "completion_tokens" : 4 }`, true},
		{`{"prompt_tokens":12000,"completion_tokens":700,"total_tokens":12700,"prompt_tokens_details":{"cached_tokens":8000,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":300}}`, true},
		{`{"prompt_tokens":5,"prompt_tokens_details":null,"completion_tokens_details":{"cached_tokens":9,"reasoning_tokens":1}}`, true},
		{`{"prompt_tokens":5,"completion_tokens_details":{"reasoning_tokens":2},"prompt_tokens_details":{"reasoning_tokens":7}}`, true},
		{`{"prompt_tokens":-3,"completion_tokens":0}`, true},
		{`{"prompt_cache_hit_tokens":10,"prompt_tokens":20}`, true},
		{`{"prompt_tokens":5000,"prompt_tokens_details":{"cached_tokens":1000,"cache_write_tokens":3000},"completion_tokens_details":{"cache_write_tokens":9}}`, true},
		{`{}`, true},
		{`{"completion_tokens_details":{"":0}}`, true},
		{`{"prompt_tokens":2.5e3,"completion_tokens":1}`, false},
		{`{"prompt_tokens":1234567890123456789}`, false},
		{`{"prompt\u005ftokens":7}`, false},
		{`{"prompt_tokens":"7"}`, false},
		{`{"x":{"y":{"z":1}}}`, false},
		{`{"prompt_tokens":7`, false},
		{`[1]`, false},
	} {
		u, ok := plainChatUsage([]byte(tc.body))
		if ok != tc.plain {
			t.Errorf("%s: plain read %v, want %v", tc.body, ok, tc.plain)
			continue
		}
		if !ok {
			continue
		}
		want, wok := scannedUsage([]byte(tc.body))
		if !wok || u != want {
			t.Errorf("%s: plain %+v, scanner %+v (%v)", tc.body, u, want, wok)
		}
	}
}

func FuzzPlainChatUsage(f *testing.F) {
	f.Add([]byte(`{"prompt_tokens":25,"completion_tokens":4,"total_tokens":29}`))
	f.Add([]byte(`{"prompt_tokens":1,"prompt_tokens_details":{"cached_tokens":1},"completion_tokens_details":{"reasoning_tokens":2}}`))
	f.Add([]byte(`{"prompt_tokens":4,"prompt_tokens_details":{"cached_tokens":1,"cache_write_tokens":2}}`))
	f.Add([]byte(`{"prompt_tokens":null}`))
	f.Add([]byte(`{"prompt_tokens":-5,"completion_tokens":5.7,"total_tokens":1e18}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		u, ok := plainChatUsage(body)
		if !ok {
			return
		}
		want, wok := scannedUsage(body)
		if !wok || u != want {
			t.Fatalf("%q: plain %+v, scanner %+v (%v)", body, u, want, wok)
		}
	})
}
