package openai

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
	"unsafe"

	"github.com/llmclient/llmclient"
)

// The scanner's fast path reads a Chat Completions body exactly as the encoding/json
// path does, whenever it takes the body at all.
func TestScanChatMatchesDecode(t *testing.T) {
	bodies := map[string]string{
		"empty object":   `{}`,
		"nulls":          `{"model":null,"messages":null,"tools":null,"stream":null,"max_tokens":null}`,
		"string content": `{"model":"gpt-4o","messages":[{"role":"user","content":"hi \u00e9\n"}],"stream":true,"max_tokens":12}`,
		"parts": `{"model":"m","messages":[{"role":"developer","content":[{"type":"text","text":"a"},` +
			`{"type":"image_url","image_url":{"url":"data:x","detail":"low"}},{"type":"input_audio"}]}],"max_completion_tokens":5,"max_tokens":9}`,
		"tools": `{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",` +
			`"function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c1","content":"42","name":"f"}],` +
			`"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}]}`,
		"schema":    `{"model":"m","messages":[],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"}}}}`,
		"extra":     `{"model":"m","messages":[{"role":"user","content":"x","extra":[1,{"a":null}]}],"seed":3,"logit_bias":{"1":2}}`,
		"huge":      `{"model":"m","max_tokens":99999999999999999,"messages":[]}`,
		"no role":   `{"messages":[{"content":"x"}]}`,
		"cache key": `{"model":"m","prompt_cache_key":"tenant-\u00e9","messages":[{"role":"user","content":"x"}]}`,
		"null key":  `{"model":"m","prompt_cache_key":null,"messages":[]}`,
	}
	files, _ := filepath.Glob("testdata/request_*.json")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		bodies[f] = string(b)
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			var fast, slow llmclient.APICall
			if !scanChat([]byte(body), &fast) {
				t.Fatalf("the scanner refused a well-formed body")
			}
			decodeChat([]byte(body), &slow)
			slow.Request.MaxTokens = int(clampTokens(int64(slow.Request.MaxTokens)))
			if !reflect.DeepEqual(normalize(fast), normalize(slow)) {
				t.Fatalf("scanner:\n%+v\nencoding/json:\n%+v", fast, slow)
			}
		})
	}
	var call llmclient.APICall
	if !scanChat([]byte(bodies["cache key"]), &call) || call.Request.PromptCacheKey != "tenant-é" {
		t.Errorf("prompt_cache_key read as %q, want %q", call.Request.PromptCacheKey, "tenant-é")
	}
}

// normalize makes nil and empty slices, and raw JSON spacing, compare equal.
func normalize(c llmclient.APICall) llmclient.APICall {
	r := &c.Request
	if len(r.Messages) == 0 {
		r.Messages = nil
	}
	for i := range r.Messages {
		if len(r.Messages[i].Content) == 0 {
			r.Messages[i].Content = nil
		}
	}
	if len(r.Tools) == 0 {
		r.Tools = nil
	}
	for i := range r.Tools {
		r.Tools[i].Parameters = []byte(strings.Join(strings.Fields(string(r.Tools[i].Parameters)), ""))
	}
	if r.ResponseFormat != nil {
		rf := *r.ResponseFormat
		rf.Schema = []byte(strings.Join(strings.Fields(string(rf.Schema)), ""))
		r.ResponseFormat = &rf
	}
	return c
}

// FuzzScanChat: the scanner never panics, and whenever it takes a body it reads it as
// encoding/json does.
func FuzzScanChat(f *testing.F) {
	f.Add(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"stream":true}`)
	f.Add(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"tools":[{"function":{"name":"f"}}]}`)
	f.Add(`{"messages":[{"content":null,"tool_calls":[{"id":"x","function":{"arguments":"{}"}}]}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		var fast, slow llmclient.APICall
		// The scanner is lenient about raw control characters in strings and passes invalid
		// UTF-8 through where encoding/json substitutes U+FFFD; a vendor rejects such bodies
		// anyway, and only valid ones are compared.
		if !scanChat([]byte(body), &fast) || !jsonValid(body) || !utf8.ValidString(body) {
			return
		}
		decodeChat([]byte(body), &slow)
		slow.Request.MaxTokens = int(clampTokens(int64(slow.Request.MaxTokens)))
		if !reflect.DeepEqual(normalize(fast), normalize(slow)) {
			t.Fatalf("body %q\nscanner:\n%+v\nencoding/json:\n%+v", body, fast, slow)
		}
	})
}

func jsonValid(s string) bool { return json.Valid([]byte(s)) }

// TestNameCache: a name read again comes from the cache without allocating, whatever
// other names share its slot, and concurrent readers always get the name they read.
func TestNameCache(t *testing.T) {
	var c nameCache
	names := []string{"gpt-4o-mini", "gpt-4o", "o3", "gpt-4.1-nano", "x", strings.Repeat("m", 128), strings.Repeat("m", 129)}
	for _, n := range names {
		if got := c.name([]byte(n)); got != n {
			t.Fatalf("name(%q) = %q", n, got)
		}
	}
	if got := c.name(nil); got != "" {
		t.Fatalf("name(nil) = %q", got)
	}
	b := []byte("gpt-4o-mini")
	c.name(b)
	if allocs := testing.AllocsPerRun(100, func() { c.name(b) }); allocs != 0 {
		t.Fatalf("a repeated name allocates %v times", allocs)
	}
	b[0] = 'G' // the caller's bytes change: the cached string does not
	if got := c.name([]byte("gpt-4o-mini")); got != "gpt-4o-mini" {
		t.Fatalf("cached name changed to %q", got)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				n := names[(g+i)%len(names)]
				if got := c.name([]byte(n)); got != n {
					t.Errorf("name(%q) = %q", n, got)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestScanChatModelApart: the message text is the body's own bytes (not copied), and an
// escaped string a copy; the model, which outlives the call, is neither, so it never
// holds the body in memory.
func TestScanChatModelApart(t *testing.T) {
	body := []byte(`{"model":"gpt-4o-mini-apart","messages":[{"role":"user","content":"hi"},{"role":"user","content":"a\nb"}]}`)
	var call llmclient.APICall
	if !scanChat(body, &call) {
		t.Fatal("not taken")
	}
	model, text, escaped := call.Request.Model, call.Request.Messages[0].Content[0].Text, call.Request.Messages[1].Content[0].Text
	if model != "gpt-4o-mini-apart" || text != "hi" || escaped != "a\nb" {
		t.Fatalf("read %q, %q, %q", model, text, escaped)
	}
	start := uintptr(unsafe.Pointer(&body[0]))
	in := func(s string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		return p >= start && p < start+uintptr(len(body))
	}
	if !in(text) || in(escaped) || in(model) {
		t.Fatalf("in the body: text %v (want true), escaped text %v, model %v (want false)", in(text), in(escaped), in(model))
	}
}
