package jsonscan

import (
	"strings"
	"testing"
)

// differentialSeeds are documents of the shapes the dialects and usage readers read, and
// edge cases of the fast paths: whitespace around every token, escapes, strings around
// the eight-byte and 64-byte boundaries, trailing commas, mismatched brackets, errors.
var differentialSeeds = []string{
	`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello to the team and wish them a good week."}],"max_tokens":64}`,
	` { "model" : "m" , "stream" : true , "messages" : [ { "role" : "user" , "content" : [ { "type" : "text" , "text" : "a\nb" } ] } ] } `,
	`{"usage":{"prompt_tokens":25,"completion_tokens":4,"total_tokens":29,"x":[1.5e3,-0,null,false]}}`,
	`{"a":"` + strings.Repeat("x", 7) + `","b":"` + strings.Repeat("y", 8) + `","c":"` + strings.Repeat("z", 63) + `","d":"` + strings.Repeat("w", 64) + `\"","e":"` + strings.Repeat("v", 65) + `"}`,
	`[1,2,]`, `{"a":1,}`, `[1}`, `{"a":1]`, `{"a" 1}`, `{"a":1 "b":2}`, `{1:2}`, `"\u12"`, `"\ud83d\ude00\u00e9\/"`,
	`[[[[{"a":[{}]}]]]]`, `[]`, `{}`, `[ ]`, `{ }`, `["a\\","b\\\\"]`, `{"k":"v"`, `"unterminated`, `nul`, `[tru]`,
	`{"":""}`, `[-1,0.5,1e400,9223372036854775807,-9223372036854775808,12345678901234567890]`,
	`[123456789012345678,999999999999999999,1234567890123456789,7,7.5,7e2,7E2,70,07,0,42x,9]`, `5`, `12`,
}

// FuzzDifferential runs Scanner and the reference scanner through the same calls on the
// same document and fails on the first call whose result, error or offset differs. The
// calls are chosen by ops, one per byte, or, with no ops, by a walk that reads every
// value with the method of its kind.
func FuzzDifferential(f *testing.F) {
	for i, s := range differentialSeeds {
		f.Add([]byte(s), []byte{})
		f.Add([]byte(s), []byte{byte(i), 1, 4, 5, 3, 4, 6, 3, 4, 7, 3, 10, 3, 11})
	}
	f.Fuzz(func(t *testing.T, doc, ops []byte) {
		var s Scanner
		var r refScanner
		s.Reset(doc)
		r.Reset(doc)
		c := comparer{t: t, s: &s, r: &r}
		if len(ops) == 0 {
			c.walk(0)
			c.op(11) // End
			return
		}
		for _, op := range ops {
			c.op(op)
		}
		c.op(11)
	})
}

type comparer struct {
	t     *testing.T
	s     *Scanner
	r     *refScanner
	calls []string
}

// check fails when the two scanners' state differs after the call named.
func (c *comparer) check(name string, got, want any) {
	c.t.Helper()
	c.calls = append(c.calls, name)
	if got != want {
		c.t.Fatalf("after %v: %v, reference %v", c.calls, got, want)
	}
	if c.s.Offset() != c.r.Offset() {
		c.t.Fatalf("after %v: offset %d, reference %d", c.calls, c.s.Offset(), c.r.Offset())
	}
	se, re := c.s.Err(), c.r.Err()
	if (se == nil) != (re == nil) || se != nil && se.Error() != re.Error() {
		c.t.Fatalf("after %v: error %v, reference %v", c.calls, se, re)
	}
}

func (c *comparer) op(op byte) {
	c.t.Helper()
	s, r := c.s, c.r
	switch op % 12 {
	case 0:
		c.check("Peek", s.Peek(), r.Peek())
	case 1:
		c.check("Object", s.Object(), r.Object())
	case 2:
		c.check("Array", s.Array(), r.Array())
	case 3:
		c.check("More", s.More(), r.More())
	case 4:
		c.check("Key", string(s.Key()), string(r.Key()))
	case 5:
		c.check("Str", string(s.Str()), string(r.Str()))
	case 6:
		c.check("Text", s.Text(), r.Text())
	case 7:
		c.check("Int", s.Int(), r.Int())
	case 8:
		c.check("Bool", s.Bool(), r.Bool())
	case 9:
		c.check("Null", s.Null(), r.Null())
	case 10:
		s.Skip()
		r.Skip()
		c.check("Skip", true, true)
	case 11:
		s.End()
		r.End()
		c.check("End", true, true)
	}
}

// walk reads the next value by its kind, recursively.
func (c *comparer) walk(depth int) {
	k := c.s.Peek()
	c.check("Peek", k, c.r.Peek())
	if depth > 64 {
		c.op(10)
		return
	}
	switch k {
	case Object:
		more, rmore := c.s.Object(), c.r.Object()
		for c.check("Object/More", more, rmore); more; {
			c.op(4)
			c.walk(depth + 1)
			more, rmore = c.s.More(), c.r.More()
			c.check("More", more, rmore)
		}
	case Array:
		more, rmore := c.s.Array(), c.r.Array()
		for c.check("Array/More", more, rmore); more; {
			c.walk(depth + 1)
			more, rmore = c.s.More(), c.r.More()
			c.check("More", more, rmore)
		}
	case String:
		c.op(5)
	case Number:
		c.op(7)
	case Bool:
		c.op(8)
	case Null:
		c.op(9)
	default:
		c.op(10)
	}
}
