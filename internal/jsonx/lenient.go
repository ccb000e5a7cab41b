package jsonx

import "strconv"

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
