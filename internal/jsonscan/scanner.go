// Package jsonscan reads JSON documents in place, one token at a time, without building a
// tree or reflecting on types. It exists for hot paths such as decoding streamed LLM chunks,
// where encoding/json's allocations dominate the cost.
//
// A caller walks the document in order: Object/Key/More for objects, Array/More for arrays,
// Str, Int, Count, Bool and Null for scalars, Skip for values it does not need. The first syntax
// error is kept and every later call becomes a no-op returning a zero value, so a walker
// checks Err once at the end, like bufio.Scanner.
//
// The scanner validates JSON structure, literals, numbers and escape sequences. It is lenient
// in two ways, both harmless for its use: raw control characters inside strings are accepted
// and invalid UTF-8 is passed through unchanged.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// MaxDepth is the deepest nesting of objects and arrays the scanner accepts.
const MaxDepth = 512

// SyntaxError describes malformed JSON.
type SyntaxError struct {
	Msg    string
	Offset int // byte offset in the document where the error was found
}

// Error returns "jsonscan: <msg> at offset N".
func (e *SyntaxError) Error() string {
	return "jsonscan: " + e.Msg + " at offset " + strconv.Itoa(e.Offset)
}

// Kind is the type of the next value.
type Kind uint8

// The value kinds Peek reports. Invalid means there is no valid value start at the
// current position (or the scanner has failed).
const (
	Invalid Kind = iota
	Object
	Array
	String
	Number
	Bool
	Null
)

// Scanner walks one JSON document. The zero value is an empty document; Reset gives it
// data. A Scanner reuses its buffers across Resets and is not safe for concurrent use.
type Scanner struct {
	data   []byte
	pos    int
	err    error
	buf    []byte // unescaped strings
	depth  int    // open containers
	closer byte   // '}' or ']': what closes the innermost open container
	// objects has bit d set when the container at depth d (from 0) is an object, clear
	// for an array: the nesting without an allocation.
	objects [MaxDepth / 64]uint64
	text    []byte // the chunk Text copies strings into; append-only, never rewritten
}

// Reset starts scanning data, keeping the scanner's buffers.
func (s *Scanner) Reset(data []byte) {
	s.data = data
	s.pos = 0
	s.err = nil
	s.depth = 0
}

// Err returns the first syntax error, or nil.
func (s *Scanner) Err() error { return s.err }

// Offset returns the current byte offset in the document.
func (s *Scanner) Offset() int { return s.pos }

// fail keeps the first error and empties the document's view, so that every later call
// finds no input where it expects a token and does nothing: no method needs to test err
// first.
func (s *Scanner) fail(msg string) {
	if s.err == nil {
		s.err = &SyntaxError{Msg: msg, Offset: s.pos}
	}
	s.data = s.data[:0]
}

// ws skips whitespace. The common case, no whitespace at all, is decided inline.
func (s *Scanner) ws() {
	if s.pos < len(s.data) && s.data[s.pos] > ' ' {
		return
	}
	s.skipWS()
}

// skipWS is ws's loop.
func (s *Scanner) skipWS() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// Peek returns the kind of the next value without consuming it.
func (s *Scanner) Peek() Kind {
	s.ws()
	if s.pos >= len(s.data) {
		return Invalid
	}
	return kinds[s.data[s.pos]]
}

// kinds is the Kind of the value each byte starts.
var kinds = func() (k [256]Kind) {
	k['{'], k['['], k['"'], k['t'], k['f'], k['n'], k['-'] = Object, Array, String, Bool, Bool, Null, Number
	for c := '0'; c <= '9'; c++ {
		k[c] = Number
	}
	return k
}()

// Object consumes the '{' that opens an object and reports whether the object has a
// member; an empty object is consumed whole. For each member, call Key, read or Skip the
// value, then More.
func (s *Scanner) Object() bool { return s.open('{', '}') }

// Array consumes the '[' that opens an array and reports whether the array has an element;
// an empty array is consumed whole. For each element, read or Skip it, then call More.
func (s *Scanner) Array() bool { return s.open('[', ']') }

func (s *Scanner) open(open, close byte) bool {
	s.ws()
	if s.pos >= len(s.data) || s.data[s.pos] != open {
		if open == '{' {
			s.fail("expected object")
		} else {
			s.fail("expected array")
		}
		return false
	}
	if s.depth >= MaxDepth {
		s.fail("nesting too deep")
		return false
	}
	i := s.pos + 1
	if d := s.data; i < len(d) && d[i] > ' ' { // no space after the bracket: no reload of the view
		if d[i] == close {
			s.pos = i + 1
			return false
		}
		s.pos = i
	} else {
		s.pos = i
		s.skipWS()
		if s.pos < len(s.data) && s.data[s.pos] == close {
			s.pos++
			return false
		}
	}
	d := uint(s.depth)
	w, bit := &s.objects[d/64%uint(len(s.objects))], uint64(1)<<(d%64)
	if open == '{' {
		*w |= bit
	} else {
		*w &^= bit
	}
	s.depth++
	s.closer = close
	return true
}

// More is called after each member or element: it consumes a ',' and reports true when
// another one follows, or consumes the closing bracket and reports false.
func (s *Scanner) More() bool {
	if i := s.pos; i+1 < len(s.data) && s.data[i] == ',' && s.depth > 0 {
		// The next member of an object, or element of an array, no space before the comma
		// (nor, in an array, after it: neither a space nor the ']' of a trailing comma).
		if s.closer == '}' || s.data[i+1] > ' ' && s.data[i+1] != ']' {
			s.pos = i + 1
			return true
		}
	}
	if s.depth == 0 {
		s.fail("More outside an object or array")
		return false
	}
	s.ws()
	if s.pos >= len(s.data) {
		s.fail("unexpected end of input")
		return false
	}
	close := s.closer
	switch c := s.data[s.pos]; {
	case c == ',':
		s.pos++
		if close == ']' {
			s.ws()
			if s.pos < len(s.data) && s.data[s.pos] == ']' {
				s.fail("trailing comma")
				return false
			}
		}
		return true
	case c == close:
		s.pos++
		s.depth--
		if s.depth > 0 {
			d := uint(s.depth - 1)
			s.closer = ']'
			if s.objects[d/64%uint(len(s.objects))]>>(d%64)&1 != 0 {
				s.closer = '}'
			}
		}
		return false
	}
	s.fail("expected ',' or '" + string(close) + "'")
	return false
}

// Key reads an object member's name and the ':' after it. The name is unescaped; it is
// valid until the next call on the scanner.
func (s *Scanner) Key() []byte {
	s.ws()
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		s.fail("expected member name")
		return nil
	}
	k, i, ok := s.plainStr()
	if !ok {
		k = s.strRest(i)
	}
	if i := s.pos; i < len(s.data) && s.data[i] == ':' { // no space before the colon
		s.pos = i + 1
		return k
	}
	s.ws()
	if s.pos >= len(s.data) || s.data[s.pos] != ':' {
		s.fail("expected ':'")
		return nil
	}
	s.pos++
	return k
}

// Str reads a string value and returns it unescaped; null reads as nil. The bytes point into
// the document or into a buffer the scanner reuses: they are valid until the next call on
// the scanner.
func (s *Scanner) Str() []byte {
	if i := s.pos; i < len(s.data) && s.data[i] == '"' { // a string, no space before it
		if b, i, ok := s.plainStr(); ok {
			return b
		} else {
			return s.strRest(i)
		}
	}
	switch s.Peek() {
	case String:
		return s.str()
	case Null:
		s.literal("null")
		return nil
	}
	s.fail("expected string")
	return nil
}

// Text reads a string value as a Go string, unescaped; null reads as "". Short strings
// share a few larger allocations instead of one each: they are copied into a chunk of
// between 256 bytes and 4 KiB (the document's size, within those bounds), which stays in
// memory while any of its strings is referenced; a string longer than a quarter of the
// chunk gets its own allocation. The strings are immutable and outlive the Scanner and
// its Resets.
func (s *Scanner) Text() string {
	b := s.Str()
	if len(b) == 0 {
		return ""
	}
	if cap(s.text)-len(s.text) < len(b) {
		chunk := min(max(len(s.data), 256), 4096)
		if len(b) > chunk/4 {
			return string(b)
		}
		s.text = make([]byte, 0, chunk)
	}
	start := len(s.text)
	s.text = append(s.text, b...) // within capacity: no byte a returned string holds moves or changes
	return unsafe.String(&s.text[start], len(b))
}

// UseText makes buf the chunk Text copies strings into next, in place of one it would
// allocate: a caller that allocates memory for the document's values anyway can hold
// their first strings in the same allocation. Text appends to buf within its capacity
// (from its length on) and never rewrites what it appended; when buf is full, Text
// allocates chunks as usual. The caller must not write to buf's capacity beyond its
// length while a string Text returned is in use.
func (s *Scanner) UseText(buf []byte) { s.text = buf }

// Int reads a number as an int64 (a fraction is truncated); null reads as 0.
func (s *Scanner) Int() int64 {
	if n, ok := s.smallInt(); ok {
		return n
	}
	switch s.Peek() {
	case Number:
		return s.number()
	case Null:
		s.literal("null")
		return 0
	}
	s.fail("expected number")
	return 0
}

// smallInt reads the common case of a number at once: a positive integer of at most 18
// digits, no space before it, and no fraction or exponent after it. It reports false,
// having read nothing, for anything else.
func (s *Scanner) smallInt() (int64, bool) {
	d, i := s.data, s.pos
	if i >= len(d) || d[i] < '1' || d[i] > '9' {
		return 0, false
	}
	n, j := int64(d[i]-'0'), i+1
	for j < len(d) && j-i < 18 && d[j] >= '0' && d[j] <= '9' {
		n = n*10 + int64(d[j]-'0')
		j++
	}
	if j < len(d) && (d[j] == '.' || d[j] == 'e' || d[j] == 'E' || d[j] >= '0' && d[j] <= '9') {
		return 0, false
	}
	s.pos = j
	return n, true
}

// Count reads a count (a usage report's tokens) by the rule every usage reader follows,
// never failing on a value that is not one: an integer as it is, a negative one too; a
// number with a fraction or an exponent as its value truncated toward zero (5.7 is 5,
// 1e3 is 1000); null as 0; and as -1, which no count can be, any other value, a negative
// number that is not an integer, and a number beyond int. Only malformed JSON fails the
// scanner. The Client takes a report with a negative count as no report.
func (s *Scanner) Count() int {
	if n, ok := s.smallInt(); ok {
		if int64(int(n)) != n {
			return -1 // beyond int (32-bit platforms)
		}
		return int(n)
	}
	switch s.Peek() {
	case Number:
		tok, integer := s.numberToken()
		if s.err != nil {
			return 0
		}
		return countOf(tok, integer)
	case Null:
		s.literal("null")
		return 0
	}
	s.Skip()
	return -1
}

// countOf is the count a number token states (see Count).
func countOf(tok []byte, integer bool) int {
	if integer {
		if n, err := strconv.ParseInt(string(tok), 10, strconv.IntSize); err == nil {
			return int(n)
		}
		return -1 // beyond int
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil || !(f >= 0 && f < float64(maxInt)) { // negative, or beyond int
		return -1
	}
	return int(f)
}

const maxInt = int(^uint(0) >> 1)

// CountOf is Count for a whole JSON value (as encoding/json hands one to an UnmarshalJSON
// method); -1 for malformed JSON.
func CountOf(v []byte) int {
	var s Scanner
	s.Reset(v)
	n := s.Count()
	s.End()
	if s.err != nil {
		return -1
	}
	return n
}

// Bool reads true or false; null reads as false.
func (s *Scanner) Bool() bool {
	switch s.Peek() {
	case Bool:
		if s.data[s.pos] == 't' {
			s.literal("true")
			return true
		}
		s.literal("false")
		return false
	case Null:
		s.literal("null")
		return false
	}
	s.fail("expected boolean")
	return false
}

// Null consumes a null and reports true when the next value is null; otherwise it consumes
// nothing and reports false.
func (s *Scanner) Null() bool {
	if s.Peek() != Null {
		return false
	}
	s.literal("null")
	return s.err == nil
}

// Skip consumes the next value, whatever it is, validating it.
func (s *Scanner) Skip() {
	switch s.Peek() {
	case Object:
		for more := s.Object(); more; more = s.More() {
			s.Key()
			s.Skip()
		}
	case Array:
		for more := s.Array(); more; more = s.More() {
			s.Skip()
		}
	case String:
		s.str()
	case Number:
		s.numberToken()
	case Bool:
		if s.data[s.pos] == 't' {
			s.literal("true")
		} else {
			s.literal("false")
		}
	case Null:
		s.literal("null")
	default:
		if s.err == nil && s.pos >= len(s.data) {
			s.fail("unexpected end of input")
		}
		s.fail("expected value")
	}
}

// End checks that only whitespace follows the top-level value.
func (s *Scanner) End() {
	s.ws()
	if s.pos != len(s.data) {
		s.fail("unexpected data after top-level value")
	}
}

func (s *Scanner) literal(lit string) {
	if len(s.data)-s.pos < len(lit) || string(s.data[s.pos:s.pos+len(lit)]) != lit {
		s.fail("invalid literal")
		return
	}
	s.pos += len(lit)
}

// numberToken consumes a number and returns its bytes and whether it is an integer.
func (s *Scanner) numberToken() ([]byte, bool) {
	start := s.pos
	d := s.data
	i := s.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		s.pos = i
		s.fail("invalid number")
		return nil, false
	}
	integer := true
	if i < len(d) && d[i] == '.' {
		integer = false
		i++
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			s.pos = i
			s.fail("invalid number")
			return nil, false
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		integer = false
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			s.pos = i
			s.fail("invalid number")
			return nil, false
		}
	}
	s.pos = i
	return d[start:i], integer
}

func (s *Scanner) number() int64 {
	tok, integer := s.numberToken()
	if s.err != nil {
		return 0
	}
	if integer && len(tok) <= 18 {
		var n int64
		neg := tok[0] == '-'
		if neg {
			tok = tok[1:]
		}
		for _, c := range tok {
			n = n*10 + int64(c-'0')
		}
		if neg {
			n = -n
		}
		return n
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil || f >= 1<<63 || f < -(1<<63) {
		s.fail("number out of range")
		return 0
	}
	return int64(f)
}

// str consumes a string token (s.data[s.pos] == '"') and returns its unescaped contents.
func (s *Scanner) str() []byte {
	if b, i, ok := s.plainStr(); ok {
		return b
	} else {
		return s.strRest(i)
	}
}

// plainStr is str for the most common string in API payloads (member names, ids, tokens):
// one that ends within its first 64 bytes without an escape, found eight bytes at a time
// (the last bytes of the document one at a time). It calls nothing, so it needs no stack frame. For any other string ok is false, nothing
// is consumed, and i is where the look stopped: the first backslash, or the first byte
// not looked at; strRest goes on from there.
func (s *Scanner) plainStr() (b []byte, i int, ok bool) {
	start := s.pos + 1
	d := s.data
	end := min(len(d), start+64)
	for i = start; i+8 <= end; i += 8 {
		if m := specialBytes(binary.LittleEndian.Uint64(d[i : i+8 : i+8])); m != 0 {
			i += bits.TrailingZeros64(m) / 8
			if d[i] != '"' {
				return nil, i, false
			}
			s.pos = i + 1
			return d[start:i], i, true
		}
	}
	// Fewer than eight bytes left before end: a string that ends near the end of the
	// document (its last member's name), a byte at a time.
	for ; i < end; i++ {
		switch d[i] {
		case '"':
			s.pos = i + 1
			return d[start:i], i, true
		case '\\':
			return nil, i, false
		}
	}
	return nil, i, false
}

// strRest is str for a string plainStr left at i: the bytes before i are neither '"'
// nor '\\'.
func (s *Scanner) strRest(i int) []byte {
	start := s.pos + 1
	d := s.data
	// Longer strings switch to IndexByte.
	end := min(len(d), start+64)
	for ; i < end; i++ {
		switch d[i] {
		case '"':
			s.pos = i + 1
			return d[start:i]
		case '\\':
			return s.unescape(start, i)
		}
	}
	rest := d[end:]
	q := bytes.IndexByte(rest, '"')
	if q < 0 {
		q = len(rest)
	}
	if e := bytes.IndexByte(rest[:q], '\\'); e >= 0 {
		return s.unescape(start, end+e)
	}
	if q == len(rest) {
		s.pos = len(d)
		s.fail("unterminated string")
		return nil
	}
	s.pos = end + q + 1
	return d[start : end+q]
}

// specialBytes returns a mask whose lowest set bit is the high bit of the first byte of w
// (little-endian) that is '"' or '\\', or 0 when there is none. Bits above the lowest may
// be set by false positives; only the lowest is exact.
//
// It is the zero-byte test (x-ones)&^x&highs of w^'"' and of w^'\\' together: both
// characters are ASCII, so either x has w's high bits, and one &^w serves both.
func specialBytes(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := w ^ ('"' * ones)
	b := w ^ ('\\' * ones)
	return ((q - ones) | (b - ones)) &^ w & highs
}

// unescape decodes the string that starts at start, whose first escape is at i, into s.buf.
func (s *Scanner) unescape(start, i int) []byte {
	d := s.data
	b := append(s.buf[:0], d[start:i]...)
	for i < len(d) {
		c := d[i]
		if c == '"' {
			s.pos = i + 1
			s.buf = b
			return b
		}
		if c != '\\' {
			// Copy the run up to the next quote or backslash at once.
			j := i + 1
			for j < len(d) && d[j] != '"' && d[j] != '\\' {
				j++
			}
			b = append(b, d[i:j]...)
			i = j
			continue
		}
		if i+1 >= len(d) {
			break
		}
		switch e := d[i+1]; e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := hex4(d, i+2)
			if !ok {
				s.pos = i
				s.buf = b
				s.fail("invalid \\u escape")
				return nil
			}
			i += 6
			if utf16.IsSurrogate(r) {
				r2, ok := rune(-1), false
				if i+1 < len(d) && d[i] == '\\' && d[i+1] == 'u' {
					r2, ok = hex4(d, i+2)
				}
				if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			b = utf8.AppendRune(b, r)
			continue
		default:
			s.pos = i
			s.buf = b
			s.fail("invalid escape")
			return nil
		}
		i += 2
	}
	s.pos = len(d)
	s.buf = b
	s.fail("unterminated string")
	return nil
}

// hex4 parses the four hex digits at d[i:i+4].
func hex4(d []byte, i int) (rune, bool) {
	if i+4 > len(d) {
		return 0, false
	}
	var r rune
	for _, c := range d[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
