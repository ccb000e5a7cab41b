package llmgateway_test

import (
	"strings"
	"testing"
)

// The serving adapter's notes on its translation (here: a JSON mode the Messages API has
// no equivalent for, tool call ids it had to rewrite) reach the caller in
// x-llmclient-notes, one-shot and streamed, without the values the caller wrote; an
// answer translated without loss has none.
func TestTranslationNotesReachTheCaller(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, ""))
	const body = `{"model":"claude-sonnet","response_format":{"type":"json_object"},%s"messages":[
		{"role":"user","content":"weather?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call.secret-id","type":"function","function":{"name":"weather","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call.secret-id","content":"rain"}],
		"tools":[{"type":"function","function":{"name":"weather","parameters":{"type":"object"}}}]}`
	for _, stream := range []string{"", `"stream":true,`} {
		resp, out := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", strings.Replace(body, "%s", stream, 1))
		notes := resp.Header.Values("x-llmclient-notes")
		all := strings.Join(notes, "\n")
		t.Logf("stream=%v: %q", stream != "", notes)
		if resp.StatusCode != 200 || !strings.Contains(all, "json_object not sent") || !strings.Contains(all, "tool call id") {
			t.Errorf("stream=%v: %d notes %q: %s", stream != "", resp.StatusCode, notes, out)
		}
		if strings.Contains(all, "secret-id") {
			t.Errorf("stream=%v: a note carries the caller's id: %q", stream != "", notes)
		}
	}
	for _, stream := range []bool{false, true} {
		s := ""
		if stream {
			s = `"stream":true,`
		}
		resp, out := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", `{"model":"gpt-4o",`+s+`"messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode != 200 || len(resp.Header.Values("x-llmclient-notes")) != 0 {
			t.Errorf("stream=%v without a loss: %d notes %q: %s", stream, resp.StatusCode, resp.Header.Values("x-llmclient-notes"), out)
		}
	}
}
