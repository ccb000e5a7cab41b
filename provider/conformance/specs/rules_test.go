package specs_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"testing"
)

// The vendor rules that the schemas do not state, or that a validator could miss, each
// with where it comes from.
var (
	// anthropicIDPattern is the pattern of tool_use.id and tool_result.tool_use_id
	// (RequestToolUseBlock, RequestToolResultBlock in the Anthropic spec).
	anthropicIDPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
	// geminiName is the function name rule in the Gemini spec's FunctionCall and
	// FunctionResponse descriptions: "a-z, A-Z, 0-9, or contain underscores and dashes,
	// with a maximum length of 128".
	geminiName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)
)

const (
	// openaiMaxStop is StopConfiguration.maxItems ("Up to 4 sequences").
	openaiMaxStop = 4
	// openaiMaxToolCallID is the length OpenAI's Chat Completions API enforces on tool call
	// ids ("Invalid 'messages[1].tool_calls[0].id': string too long. Expected a string with
	// maximum length 40"); the spec does not state it.
	openaiMaxToolCallID = 40
	// responsesMaxCallID is FunctionCallOutputItemParam.call_id.maxLength.
	responsesMaxCallID = 64
	// geminiMaxStop is GenerationConfig.stopSequences: "(up to 5)".
	geminiMaxStop = 5
)

// rangeOf is the accepted range of a sampling parameter.
type rangeOf struct{ lo, hi float64 }

var sampling = map[Op]map[string]rangeOf{
	OpChatCompletions:       {"temperature": {0, 2}, "top_p": {0, 1}},
	OpResponses:             {"temperature": {0, 2}, "top_p": {0, 1}},
	OpMessages:              {"temperature": {0, 1}, "top_p": {0, 1}},
	OpGenerateContent:       {"temperature": {0, 2}, "topP": {0, 1}},
	OpStreamGenerateContent: {"temperature": {0, 2}, "topP": {0, 1}},
}

// checkRules returns every rule body breaks for op.
func checkRules(op Op, body []byte) []string {
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return []string{"body is not a JSON object: " + err.Error()}
	}
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	params := doc
	if op == OpGenerateContent || op == OpStreamGenerateContent {
		params, _ = doc["generationConfig"].(map[string]any)
	}
	for name, r := range sampling[op] {
		if x, ok := params[name].(float64); ok && (x < r.lo || x > r.hi) {
			add("%s %v is outside [%v, %v]", name, x, r.lo, r.hi)
		}
	}
	switch op {
	case OpChatCompletions:
		chatRules(doc, add)
	case OpResponses:
		responsesRules(doc, add)
	case OpMessages:
		messagesRules(doc, add)
	case OpGenerateContent, OpStreamGenerateContent:
		geminiRules(doc, params, add)
	}
	return p
}

func list(v any) []any { l, _ := v.([]any); return l }

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }

func str(v any) string { s, _ := v.(string); return s }

func chatRules(doc map[string]any, add func(string, ...any)) {
	if stop := list(doc["stop"]); len(stop) > openaiMaxStop {
		add("%d stop sequences; OpenAI takes at most %d", len(stop), openaiMaxStop)
	}
	var pending []string // the calls of the latest assistant turn not yet answered
	for i, m := range list(doc["messages"]) {
		msg := obj(m)
		switch str(msg["role"]) {
		case "assistant":
			if len(pending) > 0 {
				add("messages[%d]: assistant turn before the tool results of %q", i, pending)
			}
			pending = nil
			for _, tc := range list(msg["tool_calls"]) {
				id := str(obj(tc)["id"])
				if len(id) > openaiMaxToolCallID {
					add("messages[%d]: tool call id %q is longer than %d characters", i, id, openaiMaxToolCallID)
				}
				pending = append(pending, id)
			}
		case "tool":
			id := str(msg["tool_call_id"])
			j := slices.Index(pending, id)
			if j < 0 {
				add("messages[%d]: tool result %q answers no call of the assistant turn before it", i, id)
				continue
			}
			pending = slices.Delete(pending, j, j+1)
		default:
			if len(pending) > 0 {
				add("messages[%d]: %s message before the tool results of %q", i, str(msg["role"]), pending)
				pending = nil
			}
		}
	}
}

func responsesRules(doc map[string]any, add func(string, ...any)) {
	var calls []string
	for i, it := range list(doc["input"]) {
		item := obj(it)
		id := str(item["call_id"])
		switch str(item["type"]) {
		case "function_call":
			calls = append(calls, id)
		case "function_call_output":
			if !slices.Contains(calls, id) {
				add("input[%d]: function_call_output %q answers no earlier function_call", i, id)
			}
		default:
			continue
		}
		if len(id) > responsesMaxCallID {
			add("input[%d]: call_id %q is longer than %d characters", i, id, responsesMaxCallID)
		}
	}
}

func messagesRules(doc map[string]any, add func(string, ...any)) {
	seen := map[string]bool{}
	var pending []string
	for i, m := range list(doc["messages"]) {
		msg := obj(m)
		blocks := list(msg["content"])
		if str(msg["role"]) == "assistant" {
			if len(pending) > 0 {
				add("messages[%d]: tool_use ids %q have no tool_result right after them", i-1, pending)
			}
			pending = nil
			for _, b := range blocks {
				blk := obj(b)
				if str(blk["type"]) != "tool_use" {
					continue
				}
				id := str(blk["id"])
				if !anthropicIDPattern.MatchString(id) {
					add("messages[%d]: tool_use id %q does not match %s", i, id, anthropicIDPattern)
				}
				if seen[id] {
					add("messages[%d]: tool_use id %q is not unique", i, id)
				}
				seen[id] = true
				pending = append(pending, id)
			}
			continue
		}
		others := false
		for j, b := range blocks {
			blk := obj(b)
			if str(blk["type"]) != "tool_result" {
				others = true
				continue
			}
			id := str(blk["tool_use_id"])
			if !anthropicIDPattern.MatchString(id) {
				add("messages[%d]: tool_result tool_use_id %q does not match %s", i, id, anthropicIDPattern)
			}
			if others {
				add("messages[%d].content[%d]: tool_result after other content; tool results come first", i, j)
			}
			k := slices.Index(pending, id)
			if k < 0 {
				add("messages[%d]: tool_result %q answers no tool_use of the assistant turn before it", i, id)
				continue
			}
			pending = slices.Delete(pending, k, k+1)
		}
		if len(pending) > 0 {
			add("messages[%d]: tool_use ids %q have no tool_result right after them", i, pending)
			pending = nil
		}
	}
}

func geminiRules(doc, gen map[string]any, add func(string, ...any)) {
	if stop := list(gen["stopSequences"]); len(stop) > geminiMaxStop {
		add("%d stop sequences; Gemini takes at most %d", len(stop), geminiMaxStop)
	}
	calls := 0
	for i, c := range list(doc["contents"]) {
		content := obj(c)
		responses := 0
		for _, pt := range list(content["parts"]) {
			part := obj(pt)
			if fc := obj(part["functionCall"]); fc != nil {
				if !geminiName.MatchString(str(fc["name"])) {
					add("contents[%d]: function call name %q does not match %s", i, str(fc["name"]), geminiName)
				}
				calls++
			}
			if fr := obj(part["functionResponse"]); fr != nil {
				if !geminiName.MatchString(str(fr["name"])) {
					add("contents[%d]: function response name %q does not match %s", i, str(fr["name"]), geminiName)
				}
				responses++
			}
		}
		if str(content["role"]) == "model" {
			calls = 0
			for _, pt := range list(content["parts"]) {
				if obj(obj(pt)["functionCall"]) != nil {
					calls++
				}
			}
			continue
		}
		if responses > 0 && responses != calls {
			add("contents[%d]: %d function responses for %d function calls in the turn before", i, responses, calls)
		}
		calls = 0
	}
}

func TestRulesCatch(t *testing.T) {
	tests := []struct {
		op   Op
		body string
	}{
		{OpChatCompletions, `{"stop":["1","2","3","4","5"]}`},
		{OpChatCompletions, `{"temperature":2.5}`},
		{OpChatCompletions, `{"messages":[{"role":"assistant","tool_calls":[{"id":"call_0__thought__CiQBcsjafDx7c2lnbmF0dXJlcw"}]},{"role":"tool","tool_call_id":"call_0__thought__CiQBcsjafDx7c2lnbmF0dXJlcw"}]}`},
		{OpChatCompletions, `{"messages":[{"role":"assistant","tool_calls":[{"id":"a"}]},{"role":"user","content":"x"},{"role":"tool","tool_call_id":"a"}]}`},
		{OpResponses, `{"input":[{"type":"function_call_output","call_id":"x"}]}`},
		{OpMessages, `{"temperature":1.5}`},
		{OpMessages, `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"functions.f:0"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"functions.f:0"}]}]}`},
		{OpMessages, `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a"}]},{"role":"user","content":[{"type":"text","text":"x"},{"type":"tool_result","tool_use_id":"a"}]}]}`},
		{OpMessages, `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a"}]},{"role":"user","content":[{"type":"text","text":"x"}]}]}`},
		{OpMessages, `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}]},{"role":"assistant","content":[{"type":"tool_use","id":"a"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}]}]}`},
		{OpGenerateContent, `{"generationConfig":{"stopSequences":["1","2","3","4","5","6"]}}`},
		{OpGenerateContent, `{"contents":[{"role":"model","parts":[{"functionCall":{"name":"f"}},{"functionCall":{"name":"f"}}]},{"role":"user","parts":[{"functionResponse":{"name":"f"}}]}]}`},
	}
	for _, tt := range tests {
		if p := checkRules(tt.op, []byte(tt.body)); len(p) == 0 {
			t.Errorf("%s: %s passes the rules", tt.op, tt.body)
		}
	}
	ok := `{"temperature":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1"},{"type":"text","text":"x"}]}]}`
	if p := checkRules(OpMessages, []byte(ok)); len(p) > 0 {
		t.Errorf("a valid body breaks rules: %q", p)
	}
}
