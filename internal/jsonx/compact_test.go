package jsonx_test

import (
	"encoding/json"
	"testing"

	"github.com/llmclient/llmclient/internal/jsonx"
)

func TestCompact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{`{ "a" : [1, 2 ], "b":"x y" }`, `{"a":[1,2],"b":"x y"}`},
		{"\n\t\"s\"\n", `"s"`},
		{`{"a":`, `{"a":`}, // not JSON: unchanged
	}
	for _, tt := range tests {
		if got := jsonx.Compact([]byte(tt.in)); got != tt.want {
			t.Errorf("Compact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := jsonx.CompactRaw(nil); got != nil {
		t.Errorf("CompactRaw(nil) = %q, want nil", got)
	}
	if got := jsonx.CompactRaw(json.RawMessage(`{ "a" : 1 }`)); string(got) != `{"a":1}` {
		t.Errorf("CompactRaw = %q", got)
	}
}

func FuzzCompact(f *testing.F) {
	f.Add(`{ "a" : [1, 2 ] }`)
	f.Add(`{"a":`)
	f.Add("\"\\u00e9\" ")
	f.Fuzz(func(t *testing.T, in string) {
		got := jsonx.Compact([]byte(in))
		if !json.Valid([]byte(in)) {
			if got != in {
				t.Fatalf("invalid input changed: %q -> %q", in, got)
			}
			return
		}
		if !json.Valid([]byte(got)) || len(got) > len(in) {
			t.Fatalf("Compact(%q) = %q", in, got)
		}
	})
}
