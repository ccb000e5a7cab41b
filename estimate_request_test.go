package llmclient_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmclient/llmclient/estimate"
	"github.com/llmclient/llmclient/format"

	"github.com/llmclient/llmclient"
)

// runes counts one token per character, so the formula's framing is easy to see.
var runes = countFunc(func(_, text string) int { return utf8.RuneCountInString(text) })

func TestEstimatePromptTokensFormula(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  llmclient.Request
		want int
	}{
		{"empty", llmclient.Request{}, 3},
		{"one message", llmclient.Request{Messages: []llmclient.Message{llmclient.UserMessage("hello")}}, 3 + 4 + 5},
		{"name", llmclient.Request{Messages: []llmclient.Message{{Role: llmclient.RoleUser, Name: "bob",
			Content: []llmclient.Part{llmclient.TextPart("hi")}}}}, 3 + 4 + 2 + 1 + 3},
		{"images", llmclient.Request{Messages: []llmclient.Message{{Role: llmclient.RoleUser, Content: []llmclient.Part{
			llmclient.TextPart("look"), llmclient.ImageURLPart("https://x/y.png"),
			{Type: llmclient.PartImage, ImageURL: "https://x/z.png", Detail: "low"}}}}}, 3 + 4 + 4 + 765 + 85},
		{"tool call and result", llmclient.Request{Messages: []llmclient.Message{
			{Role: llmclient.RoleAssistant, ToolCalls: []llmclient.ToolCall{{ID: "c1", Name: "f", Arguments: `{"a":1}`}}},
			llmclient.ToolResultMessage("c1", "42"),
		}}, 3 + (4 + 3 + 1 + 7) + (4 + 2 + 2)},
		{"tools and schema", llmclient.Request{
			Tools: []llmclient.Tool{{Name: "f", Description: "does", Parameters: json.RawMessage(`{}`)}},
			ResponseFormat: &llmclient.ResponseFormat{Type: format.JSONSchema, Name: "out",
				Schema: json.RawMessage(`{"type":"object"}`)},
		}, 3 + 12 + 7 + 1 + 4 + 2 + 3 + 17},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := llmclient.EstimatePromptTokens(runes, &tc.req); got != tc.want {
				t.Fatalf("EstimatePromptTokens = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestEstimatePromptTokensNilEstimatorIsHeuristic(t *testing.T) {
	req := &llmclient.Request{Model: "gpt-4o", Messages: []llmclient.Message{llmclient.UserMessage("The quick brown fox.")}}
	h := llmclient.EstimatePromptTokens(estimate.Heuristic{}, req)
	if got := llmclient.EstimatePromptTokens(nil, req); got != h || h < 3+4+4 {
		t.Fatalf("nil estimator %d, heuristic %d", got, h)
	}
}

func TestEncodingForModel(t *testing.T) {
	for model, want := range map[string]string{
		"gpt-4o": "o200k_base", "gpt-4o-mini": "o200k_base", "gpt-4.1-nano": "o200k_base",
		"gpt-4.5-preview": "o200k_base", "o3-mini": "o200k_base", "gpt-5": "o200k_base",
		"chatgpt-4o-latest": "o200k_base", "gpt-oss-120b": "o200k_base",
		"gpt-4": "cl100k_base", "gpt-4-turbo": "cl100k_base", "gpt-4-0613": "cl100k_base",
		"gpt-3.5-turbo": "cl100k_base", "gpt-35-turbo": "cl100k_base",
		"text-embedding-3-small": "cl100k_base", "openai/gpt-4": "cl100k_base",
		"claude-sonnet-4-5": "o200k_base", "gemini-2.5-pro": "o200k_base", "": "o200k_base",
	} {
		if got := estimate.EncodingForModel(model); got != want {
			t.Errorf("EncodingForModel(%q) = %q, want %q", model, got, want)
		}
	}
}

func TestHeuristicEstimatorShapes(t *testing.T) {
	h := estimate.Heuristic{}
	for _, tc := range []struct {
		text     string
		min, max int
	}{
		{"", 0, 0},
		{"hello", 1, 1},
		{"Hello, world!", 3, 5},
		{"1234567", 3, 3},
		{"   \n\n\t", 1, 3},
		{"你好世界", 2, 6},
		{"こんにちは", 1, 6},
		{"안녕하세요", 1, 6},
		{"🦊🦊", 2, 7},
		{"\xff\xfe", 1, 3},
		{strings.Repeat("a", 100), 10, 40},
	} {
		if got := h.CountTokens("gpt-4o", tc.text); got < tc.min || got > tc.max {
			t.Errorf("CountTokens(%q) = %d, want %d..%d", tc.text, got, tc.min, tc.max)
		}
	}
	// cl100k spends more on Chinese than o200k.
	zh := strings.Repeat("城市的夜晚，路灯一盏接一盏地亮起来。", 10)
	if a, b := h.CountTokens("gpt-4", zh), h.CountTokens("gpt-4o", zh); a <= b {
		t.Errorf("Chinese: cl100k %d ≤ o200k %d", a, b)
	}
}

func FuzzHeuristicEstimator(f *testing.F) {
	for _, s := range []string{"", "hello world", "func main() {\n\tfmt.Println(\"hi\")\n}", `{"a":[1,2,{"b":null}]}`,
		"城市的夜晚", "日本語のテキスト", "한국어 텍스트", "🦊 emoji", "\xe4\xb8", "\xf0\x9f", "a\u00a0b", "Ünïcödé café"} {
		f.Add(s)
	}
	h := estimate.Heuristic{}
	f.Fuzz(func(t *testing.T, s string) {
		for _, model := range []string{"gpt-4o", "gpt-4"} {
			n := h.CountTokens(model, s)
			if n < 0 || n > 2*len(s)+1 || (s == "") != (n == 0) {
				t.Fatalf("CountTokens(%s, %q) = %d", model, s, n)
			}
			if n != h.CountTokens(model, s) {
				t.Fatal("not deterministic")
			}
			// Text added after a text never takes back more than two of its tokens: it can
			// only change how the end joins the start of what follows (a blank becomes a
			// word's prefix, a newline joins punctuation), when the text is valid UTF-8.
			if utf8.ValidString(s) {
				for i := range min(len(s), 64) {
					if head := s[:len(s)-i]; utf8.ValidString(head) {
						if m := h.CountTokens(model, head); m > n+2 {
							t.Fatalf("CountTokens(%s, %q) = %d, but %d for its start %q", model, s, n, m, head)
						}
					}
				}
			}
		}
	})
}
