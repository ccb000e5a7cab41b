package jsonx_test

import (
	"encoding/json"
	"testing"

	"github.com/llmclient/llmclient/internal/jsonx"
)

// TestLenient checks Int and Bool against encoding/json's own int and bool decoding.
func TestLenient(t *testing.T) {
	for _, v := range []string{
		`12`, `-3`, `0`, `-0`, `null`, `1.5`, `1e2`, `"12"`, `true`, `false`, `{}`, `[1]`,
		`9223372036854775807`, `9223372036854775808`, `-9223372036854775809`,
		`{"x":7,"x":"bad"}`, `{"x":"bad","x":7}`, `{"x":true,"x":null}`,
	} {
		checkLenient(t, v)
	}
}

// checkLenient decodes v (a value, or an object whose "x" keys are decoded in turn) into
// an int and a bool with encoding/json and into Int and Bool, and compares.
func checkLenient(t *testing.T, v string) {
	t.Helper()
	doc := v
	if len(v) == 0 || v[0] != '{' {
		doc = `{"x":` + v + `}`
	}
	if !json.Valid([]byte(doc)) {
		return
	}
	var n struct{ X int }
	var b struct{ X bool }
	var ln struct{ X jsonx.Int }
	var lb struct{ X jsonx.Bool }
	nerr, berr := json.Unmarshal([]byte(doc), &n), json.Unmarshal([]byte(doc), &b)
	if err := json.Unmarshal([]byte(doc), &ln); err != nil {
		t.Fatalf("%s: Int failed the decoding: %v", doc, err)
	}
	if err := json.Unmarshal([]byte(doc), &lb); err != nil {
		t.Fatalf("%s: Bool failed the decoding: %v", doc, err)
	}
	if ln.X.N != n.X || ln.X.Bad != (nerr != nil) {
		t.Errorf("%s: Int = %+v; encoding/json: %d, %v", doc, ln.X, n.X, nerr)
	}
	if lb.X.V != b.X || lb.X.Bad != (berr != nil) {
		t.Errorf("%s: Bool = %+v; encoding/json: %v, %v", doc, lb.X, b.X, berr)
	}
}

func FuzzLenient(f *testing.F) {
	f.Add(`12`)
	f.Add(`1e2`)
	f.Add(`{"x":1,"x":"y"}`)
	f.Add(`"true"`)
	f.Fuzz(checkLenient)
}
