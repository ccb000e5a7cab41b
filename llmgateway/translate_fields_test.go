package llmgateway_test

import (
	"strings"
	"testing"
)

// Anthropic door → Anthropic upstream: a tool_result holding text and an image (a
// screenshot tool), marked is_error and with a cache mark on its text, reaches the
// upstream as the caller wrote it.
func TestAnthropicDoorToolResultKeepsImageAndIsError(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, ""))
	resp, body := post(t, g.api.URL+"/v1/messages", "gw-key-a", `{"model":"claude-sonnet","max_tokens":64,
		"tools":[{"name":"screenshot","input_schema":{"type":"object"}}],
		"messages":[{"role":"user","content":"what is on screen?"},
		  {"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"screenshot","input":{}}]},
		  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"content":[
		    {"type":"text","text":"partial:","cache_control":{"type":"ephemeral"}},
		    {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}]}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	up := decode(t, an.lastBody())
	result := at(up, "messages", 2, "content", 0)
	if at(result, "type") != "tool_result" || at(result, "tool_use_id") != "toolu_1" || at(result, "is_error") != true {
		t.Fatalf("tool_result lost its id or is_error: %s", an.lastBody())
	}
	if at(result, "content", 0, "text") != "partial:" || at(result, "content", 0, "cache_control", "type") != "ephemeral" ||
		at(result, "content", 1, "type") != "image" || at(result, "content", 1, "source", "data") != "iVBORw0KGgo=" ||
		at(result, "content", 1, "source", "media_type") != "image/png" {
		t.Fatalf("tool_result content not sent as written: %s", an.lastBody())
	}
}

// A tool_result block the common request cannot hold (a document) is refused with a 400
// naming it, not dropped.
func TestAnthropicDoorToolResultRefusesOtherBlocks(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, ""))
	resp, body := post(t, g.api.URL+"/v1/messages", "gw-key-a", `{"model":"claude-sonnet","max_tokens":64,
		"messages":[{"role":"user","content":"read it"},
		  {"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"fetch","input":{}}]},
		  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[
		    {"type":"document","source":{"type":"text","media_type":"text/plain","data":"hi"}}]}]}]}`)
	if resp.StatusCode != 400 || !strings.Contains(body, `messages[2]: content[0].content[0]: block type \"document\"`) {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if an.count() != 0 {
		t.Fatal("the request reached the upstream")
	}
}

// parallel_tool_calls false on the OpenAI door becomes Anthropic's
// tool_choice.disable_parallel_tool_use, and reaches an OpenAI upstream as it was.
func TestOpenAIDoorParallelToolCallsFalse(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, ""))
	const tools = `"tools":[{"type":"function","function":{"name":"weather","parameters":{"type":"object"}}}]`
	for _, tc := range []struct {
		model, body string
		up          *vendor
		check       func(up map[string]any) bool
	}{
		{"claude-sonnet", `{"model":"claude-sonnet","parallel_tool_calls":false,` + tools + `,"messages":[{"role":"user","content":"weather?"}]}`, an,
			func(up map[string]any) bool {
				return at(up, "tool_choice", "type") == "auto" && at(up, "tool_choice", "disable_parallel_tool_use") == true
			}},
		{"claude-sonnet-required", `{"model":"claude-sonnet","parallel_tool_calls":false,"tool_choice":"required",` + tools + `,"messages":[{"role":"user","content":"weather?"}]}`, an,
			func(up map[string]any) bool {
				return at(up, "tool_choice", "type") == "any" && at(up, "tool_choice", "disable_parallel_tool_use") == true
			}},
		{"gpt-4o", `{"model":"gpt-4o","parallel_tool_calls":false,` + tools + `,"messages":[{"role":"user","content":"weather?"}]}`, oa,
			func(up map[string]any) bool { return at(up, "parallel_tool_calls") == false }},
	} {
		t.Run(tc.model, func(t *testing.T) {
			resp, body := post(t, g.api.URL+"/v1/chat/completions", "gw-key-a", tc.body)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if !tc.check(decode(t, tc.up.lastBody())) {
				t.Fatalf("parallel_tool_calls false lost; upstream got %s", tc.up.lastBody())
			}
		})
	}
}

// tool_choice.disable_parallel_tool_use on the Anthropic door becomes OpenAI's
// parallel_tool_calls false, and reaches an Anthropic upstream as it was.
func TestAnthropicDoorDisableParallelToolUse(t *testing.T) {
	oa, an := newVendor(t, "openai"), newVendor(t, "anthropic")
	g := startGateway(t, baseConfig(oa, an, ""))
	const tools = `"tools":[{"name":"weather","input_schema":{"type":"object"}}]`
	for _, tc := range []struct {
		model string
		up    *vendor
		check func(up map[string]any) bool
	}{
		{"gpt-4o", oa, func(up map[string]any) bool {
			return at(up, "parallel_tool_calls") == false && at(up, "tool_choice") == "required"
		}},
		{"claude-sonnet", an, func(up map[string]any) bool {
			return at(up, "tool_choice", "type") == "any" && at(up, "tool_choice", "disable_parallel_tool_use") == true
		}},
	} {
		t.Run(tc.model, func(t *testing.T) {
			resp, body := post(t, g.api.URL+"/v1/messages", "gw-key-a", `{"model":"`+tc.model+`","max_tokens":64,`+tools+`,
				"tool_choice":{"type":"any","disable_parallel_tool_use":true},"messages":[{"role":"user","content":"weather?"}]}`)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if !tc.check(decode(t, tc.up.lastBody())) {
				t.Fatalf("disable_parallel_tool_use lost; upstream got %s", tc.up.lastBody())
			}
		})
	}
}
