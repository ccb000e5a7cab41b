package jsonx

import (
	"bytes"
	"encoding/json"
)

// Compact returns raw without insignificant white space, as a vendor renders JSON for the
// model: "" when raw is empty, raw itself when it is not valid JSON.
func Compact(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	b.Grow(len(raw))
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// CompactRaw is Compact for a json.RawMessage field that must stay one: nil when raw is
// empty.
func CompactRaw(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	return json.RawMessage(Compact(raw))
}
