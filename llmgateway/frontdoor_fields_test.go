package llmgateway_test

import (
	"strings"
	"testing"
)

// The OpenAI door answers with chat completion ids (chatcmpl-…) whatever the upstream's
// ids look like: an Anthropic upstream's msg_… is not passed on. A stream's chunks share
// one id; an OpenAI upstream's own id is kept.
func TestOpenAIDoorIDsAreChatCompletionIDs(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, ""))
	for _, tc := range []struct{ model, want string }{{"claude-sonnet", ""}, {"gpt-4o", "chatcmpl-up"}} {
		resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"`+tc.model+`","messages":[{"role":"user","content":"hi"}]}`)
		id, _ := at(decode(t, body), "id").(string)
		if resp.StatusCode != 200 || !strings.HasPrefix(id, "chatcmpl-") || (tc.want != "" && id != tc.want) {
			t.Errorf("%s one-shot: %d id %q: %s", tc.model, resp.StatusCode, id, body)
		}
		resp, body = post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"`+tc.model+`","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
		ids := map[string]bool{}
		for _, e := range parseSSE(t, body) {
			if e.data != "[DONE]" {
				id, _ := at(decode(t, e.data), "id").(string)
				ids[id] = true
			}
		}
		for id := range ids {
			if resp.StatusCode != 200 || len(ids) != 1 || !strings.HasPrefix(id, "chatcmpl-") || (tc.want != "" && id != tc.want) {
				t.Errorf("%s stream: %d ids %v:\n%s", tc.model, resp.StatusCode, ids, body)
			}
		}
		if len(ids) == 0 {
			t.Errorf("%s stream: no chunks:\n%s", tc.model, body)
		}
	}
}
