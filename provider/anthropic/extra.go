package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// mergeExtra merges Request.Extra into the top level of an encoded JSON object body. An Extra
// value replaces the field the adapter set, except that when both are JSON objects the
// Extra object's keys are merged into the adapter's object (one level deep), so
// Extra{"output_config": {"effort": "low"}} keeps a generated output_config.format. A nil
// value removes the field. The result has its top-level keys sorted.
func mergeExtra(body []byte, extra map[string]any) ([]byte, error) {
	if len(extra) == 0 {
		return body, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, fmt.Errorf("anthropic: merge Extra: %w", err)
	}
	for k, v := range extra {
		if v == nil {
			delete(top, k)
			continue
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("anthropic: Extra[%q]: %w", k, err)
		}
		if old, ok := top[k]; ok && isObject(old) && isObject(raw) {
			if raw, err = mergeObjects(old, raw); err != nil {
				return nil, fmt.Errorf("anthropic: Extra[%q]: %w", k, err)
			}
		}
		top[k] = raw
	}
	out, err := json.Marshal(top)
	if err != nil {
		return nil, fmt.Errorf("anthropic: merge Extra: %w", err)
	}
	return out, nil
}

// mergeObjects sets every key of add in base; both are JSON objects.
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

func isObject(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}
