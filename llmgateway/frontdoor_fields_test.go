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

// An output limit below the vendor's range is a 400 in the front door's error shape
// naming the field, before any upstream call: OpenAI takes at least 1 for max_tokens and
// max_completion_tokens; Anthropic takes 0 to warm its prompt cache without an answer,
// which the gateway cannot pass on (0 would be the upstream's default, a whole answer).
func TestOutputLimitBelowRangeIsRefused(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, ""))
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		path, limits, param string
	}{
		{"/v1/chat/completions", `"max_tokens":0`, "max_tokens"},
		{"/v1/chat/completions", `"max_tokens":-2`, "max_tokens"},
		{"/v1/chat/completions", `"max_completion_tokens":0`, "max_completion_tokens"},
		{"/v1/chat/completions", `"max_tokens":5,"max_completion_tokens":0`, "max_completion_tokens"},
		{"/v1/chat/completions", `"max_tokens":0,"max_completion_tokens":5`, "max_tokens"},
		{"/v1/messages", `"max_tokens":0`, "max_tokens"},
		{"/v1/messages", `"max_tokens":-1`, "max_tokens"},
	} {
		for _, model := range []string{"gpt-4o", "claude-sonnet"} {
			before := oa.count() + an.count()
			resp, body := post(t, g.api.URL+tc.path, "gw-key-a", `{"model":"`+model+`",`+tc.limits+`,`+msgs+`}`)
			m := decode(t, body)
			if resp.StatusCode != 400 || oa.count()+an.count() != before {
				t.Errorf("%s %s %s: %d after %d upstream calls: %s", tc.path, model, tc.limits, resp.StatusCode, oa.count()+an.count()-before, body)
				continue
			}
			if tc.path == "/v1/messages" {
				if at(m, "type") != "error" || at(m, "error", "type") != "invalid_request_error" ||
					!strings.HasPrefix(at(m, "error", "message").(string), tc.param+":") {
					t.Errorf("%s %s: not Anthropic's error shape naming %s: %s", tc.path, tc.limits, tc.param, body)
				}
			} else if at(m, "error", "type") != "invalid_request_error" || at(m, "error", "param") != tc.param ||
				at(m, "error", "code") != "integer_below_min_value" {
				t.Errorf("%s %s: not OpenAI's error naming %s: %s", tc.path, tc.limits, tc.param, body)
			}
		}
	}
	// Leaving the limit out is the vendor's default, not a refusal.
	for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		if resp, body := post(t, g.api.URL+path, "gw-key-a", `{"model":"gpt-4o",`+msgs+`}`); resp.StatusCode != 200 {
			t.Errorf("%s without a limit: %d %s", path, resp.StatusCode, body)
		}
	}
}
