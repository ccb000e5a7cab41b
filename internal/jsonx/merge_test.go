package jsonx_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmclient/llmclient/internal/jsonx"
)

func TestMergeExtra(t *testing.T) {
	const body = `{"model":"m","generationConfig":{"maxOutputTokens":5,"temperature":0.2},"stream":true}`
	tests := []struct {
		name  string
		extra map[string]any
		want  string
	}{
		{"new field", map[string]any{"seed": 7}, `{"generationConfig":{"maxOutputTokens":5,"temperature":0.2},"model":"m","seed":7,"stream":true}`},
		{"replace scalar", map[string]any{"model": "other"}, `{"generationConfig":{"maxOutputTokens":5,"temperature":0.2},"model":"other","stream":true}`},
		{"nil removes", map[string]any{"stream": nil}, `{"generationConfig":{"maxOutputTokens":5,"temperature":0.2},"model":"m"}`},
		{"nil for a missing field", map[string]any{"absent": nil}, `{"generationConfig":{"maxOutputTokens":5,"temperature":0.2},"model":"m","stream":true}`},
		{"objects merge one level", map[string]any{"generationConfig": map[string]any{"thinkingConfig": map[string]any{"thinkingBudget": 0}}},
			`{"generationConfig":{"maxOutputTokens":5,"temperature":0.2,"thinkingConfig":{"thinkingBudget":0}},"model":"m","stream":true}`},
		{"null inside an object removes the key", map[string]any{"generationConfig": map[string]any{"temperature": nil, "maxOutputTokens": 9}},
			`{"generationConfig":{"maxOutputTokens":9},"model":"m","stream":true}`},
		{"non-object replaces an object", map[string]any{"generationConfig": []int{1}}, `{"generationConfig":[1],"model":"m","stream":true}`},
		{"object replaces a scalar", map[string]any{"model": map[string]any{"a": 1}}, `{"generationConfig":{"maxOutputTokens":5,"temperature":0.2},"model":{"a":1},"stream":true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := jsonx.MergeExtra([]byte(body), tt.extra)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestMergeExtraEmpty(t *testing.T) {
	body := []byte(`not even JSON`)
	for _, extra := range []map[string]any{nil, {}} {
		got, err := jsonx.MergeExtra(body, extra)
		if err != nil || &got[0] != &body[0] {
			t.Errorf("extra %v: got %q, %v; want body itself", extra, got, err)
		}
	}
}

func TestMergeExtraErrors(t *testing.T) {
	tests := []struct {
		name, body string
		extra      map[string]any
		prefix     string
	}{
		{"body not JSON", `{`, map[string]any{"a": 1}, "merge Extra: "},
		{"body an array", `[1]`, map[string]any{"a": 1}, "merge Extra: "},
		{"body null", `null`, map[string]any{"a": 1}, "merge Extra: "},
		{"unencodable value", `{}`, map[string]any{"f": func() {}}, `Extra["f"]: `},
		{"unencodable channel", `{"c":{}}`, map[string]any{"c": make(chan int)}, `Extra["c"]: `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := jsonx.MergeExtra([]byte(tt.body), tt.extra)
			if err == nil || !strings.HasPrefix(err.Error(), tt.prefix) {
				t.Fatalf("err = %v, want prefix %q", err, tt.prefix)
			}
			var syn *json.SyntaxError
			var typ *json.UnmarshalTypeError
			var uns *json.UnsupportedTypeError
			if !errors.As(err, &syn) && !errors.As(err, &typ) && !errors.As(err, &uns) {
				t.Errorf("err %v does not wrap the encoding/json error", err)
			}
		})
	}
}

func FuzzMergeExtra(f *testing.F) {
	f.Add(`{"a":1,"o":{"x":1}}`, "o", `{"y":2,"x":null}`)
	f.Add(`{"a":1}`, "a", `null`)
	f.Add(`{}`, "k", `[1,2]`)
	f.Add(`{"o":{}}`, "o", `{"<&>":"\u2028"}`)
	f.Add(`[]`, "k", `1`)
	f.Add(`null`, "k", `1`)
	f.Fuzz(func(t *testing.T, body, key, value string) {
		var v any
		if !utf8.ValidString(key) || json.Unmarshal([]byte(value), &v) != nil {
			return // encoding/json would rewrite an invalid key
		}
		out, err := jsonx.MergeExtra([]byte(body), map[string]any{key: v})
		if err != nil {
			return
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(out, &top); err != nil {
			t.Fatalf("result is not a JSON object: %v\n%s", err, out)
		}
		if _, ok := top[key]; ok != (v != nil) {
			t.Fatalf("key %q present %v, value %s", key, ok, value)
		}
	})
}
