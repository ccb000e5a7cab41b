package llmclient_test

import (
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/llmclient/llmclient"
)

// A tool result's error flag and a message's Name are part of the prompt as the vendors
// render it (Anthropic's is_error, OpenAI's name), so they are part of the prefix that
// WithCacheAffinity ranks keys by: prompts that differ only there do not all share a key.
func TestCacheAffinityPrefixCoversErrorFlagAndName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &callLog{}
		up := &keyedUpstream{name: "u", log: log}
		c := newClient(t, llmclient.WithUpstream(llmclient.Upstream{Name: "u", Provider: up, Keys: poolKeys}),
			llmclient.WithCacheAffinity(4096))
		keyOf := func(req *llmclient.Request) string {
			got := concurrently(t, c, log, []*llmclient.Request{req})
			if len(got) != 1 {
				t.Fatalf("one call reached the upstream %d times", len(got))
			}
			return got[0]
		}
		withResult := func(i int, isError bool, name string) *llmclient.Request {
			res := llmclient.ToolResultMessage("call_1", fmt.Sprintf("result %d ", i)+longText(5000))
			res.IsError = isError
			user := llmclient.UserMessage(fmt.Sprintf("user %d", i))
			user.Name = name
			return &llmclient.Request{Model: "m", Messages: []llmclient.Message{user, res}}
		}
		flag, named := 0, 0
		for i := range 16 {
			base := keyOf(withResult(i, false, ""))
			if keyOf(withResult(i, true, "")) != base {
				flag++
			}
			if keyOf(withResult(i, false, "alice")) != base {
				named++
			}
		}
		if flag == 0 {
			t.Errorf("16 prompts differing only in a tool result's IsError all kept their key: the flag is not in the prefix")
		}
		if named == 0 {
			t.Errorf("16 prompts differing only in a message's Name all kept their key: the name is not in the prefix")
		}
	})
}

// longText is n bytes of text.
func longText(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return string(b)
}
