package jsonx

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
)

// MergeExtra merges extra into the top level of body, an encoded JSON object. An extra
// value replaces the field of the same name, except that when both are JSON objects the
// extra object's keys are set in the body's object, one level deep (a null there removes
// that key): {"generationConfig": {"thinkingConfig": …}} keeps the generated
// generationConfig's other fields. A nil value removes the field. The result has its
// top-level keys sorted. An empty extra returns body itself.
//
// Errors carry no package prefix, so that each adapter adds its own: "merge Extra: …" when
// body is not a JSON object, `Extra["k"]: …` when a value cannot be encoded or merged.
func MergeExtra(body []byte, extra map[string]any) ([]byte, error) {
	if len(extra) == 0 {
		return body, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, fmt.Errorf("merge Extra: %w", err)
	}
	if top == nil { // null, which encoding/json accepts for a map
		return nil, fmt.Errorf("merge Extra: %w", &json.UnmarshalTypeError{Value: "null", Type: reflect.TypeOf(top)})
	}
	for k, v := range extra {
		if v == nil {
			delete(top, k)
			continue
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("Extra[%q]: %w", k, err)
		}
		if old, ok := top[k]; ok && IsObject(old) && IsObject(raw) {
			if raw, err = mergeObjects(old, raw); err != nil {
				return nil, fmt.Errorf("Extra[%q]: %w", k, err)
			}
		}
		top[k] = raw
	}
	out, err := json.Marshal(top)
	if err != nil {
		return nil, fmt.Errorf("merge Extra: %w", err)
	}
	return out, nil
}

// mergeObjects sets every key of add in base, removing those whose value is null; both
// are JSON objects.
func mergeObjects(base, add json.RawMessage) (json.RawMessage, error) {
	var b, a map[string]json.RawMessage
	if err := json.Unmarshal(base, &b); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(add, &a); err != nil {
		return nil, err
	}
	for k, v := range a {
		if bytes.Equal(v, []byte("null")) {
			delete(b, k)
			continue
		}
		b[k] = v
	}
	return json.Marshal(b)
}

// IsObject reports whether raw, leading white space aside, starts a JSON object; it does
// not validate the rest.
func IsObject(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}
