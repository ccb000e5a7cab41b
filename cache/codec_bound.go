package cache

import "fmt"

// maxEncodedElements bounds the chunks and tool calls of an encoded entry, in all: what
// MaxEncodedEntry bytes hold at chunkOverhead (Entry.Size's cost of a chunk) each. JSON
// spends as little as two bytes on an element ("{}," or "null,") that decodes to a
// Chunk of 152 bytes and more, so the input bound alone let 64 MiB of input take
// several gigabytes once decoded.
const maxEncodedElements = MaxEncodedEntry / chunkOverhead

// maxEncodedDepth is encoding/json's own nesting bound: deeper input does not decode.
const maxEncodedDepth = 10000

// checkElements counts the elements of every array in data (JSON text), without
// decoding it, and refuses more than maxEncodedElements, or nesting deeper than
// maxEncodedDepth. It does not validate data: what it lets through, json.Unmarshal
// still parses.
func checkElements(data []byte) error {
	var arrays [maxEncodedDepth/64 + 1]uint64 // bit d: the container at depth d is an array
	depth, elements := 0, 0
	var text jsonText
	opened := false // just after '['
	for _, c := range data {
		if text.inString(c) || isJSONSpace(c) {
			continue
		}
		if opened && c != ']' {
			elements++ // the first element of an array
		}
		opened = false
		switch c {
		case '[', '{':
			if depth == maxEncodedDepth {
				return fmt.Errorf("%w: nested more than %d deep", ErrCorruptEntry, maxEncodedDepth)
			}
			if c == '[' {
				arrays[depth/64] |= 1 << (depth % 64)
			} else {
				arrays[depth/64] &^= 1 << (depth % 64)
			}
			depth++
			opened = c == '['
		case ']', '}':
			if depth > 0 {
				depth--
			}
		case ',':
			if d := depth - 1; d >= 0 && arrays[d/64]&(1<<(d%64)) != 0 {
				elements++
			}
		}
		if elements > maxEncodedElements {
			return fmt.Errorf("%w: more than %d chunks and tool calls", ErrCorruptEntry, maxEncodedElements)
		}
	}
	return nil
}
