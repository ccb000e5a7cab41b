package jsonx

import (
	"strconv"

	"github.com/llmclient/llmclient/internal/jsonscan"
)

// Int is an int field decoded as encoding/json decodes an int, except that a value it
// cannot take never fails the decoding: it sets Bad and, as encoding/json does, leaves N
// as it was. null leaves N alone too. One request struct can so serve a reader that needs
// the field (and checks Bad) and one that must not fail on it.
type Int struct {
	N   int
	Bad bool
}

// UnmarshalJSON takes a JSON integer that fits an int; any other value sets Bad.
func (f *Int) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, strconv.IntSize)
	if err != nil {
		f.Bad = true
		return nil
	}
	f.N = int(n)
	return nil
}

// Bool is Int for a bool field: true and false are taken, null leaves V alone, any other
// value sets Bad.
type Bool struct {
	V   bool
	Bad bool
}

// UnmarshalJSON takes true or false; any other value but null sets Bad.
func (f *Bool) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "true":
		f.V = true
	case "false":
		f.V = false
	case "null":
	default:
		f.Bad = true
	}
	return nil
}

// Count is a usage report's count decoded by the rule of jsonscan.Scanner.Count, so that
// encoding/json and the scanner read every report alike and no value fails the decoding:
// an integer as it is, a number with a fraction or an exponent truncated toward zero,
// null as 0 (as the scanner reads it), and -1, which no count can be, for any
// other value, a negative number that is not an integer, and a number beyond int.
type Count int

// UnmarshalJSON reads the count b states; it never fails.
func (c *Count) UnmarshalJSON(b []byte) error {
	*c = Count(jsonscan.CountOf(b))
	return nil
}
