package jsonscan_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/llmclient/llmclient/internal/jsonscan"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// valid reports whether the scanner accepts doc as one JSON value.
func valid(doc string) error {
	var s jsonscan.Scanner
	s.Reset([]byte(doc))
	s.Skip()
	s.End()
	return s.Err()
}

func TestSkipValidity(t *testing.T) {
	good := []string{
		`null`, `true`, `false`, `0`, `-0`, `1`, `-12.5e+3`, `1E2`, `0.5`, `""`, `"a\"b"`, `"\u00e9\ud83d\ude00"`,
		`{}`, `[]`, ` { "a" : [ 1 , 2 , { } , [ ] ] , "b" : null } `, `[[[[]]]]`, "\t\r\n[1]\n",
		`{"a":{"b":{"c":"d"}}}`, `"raw \u0000 escape"`,
	}
	bad := []string{
		``, ` `, `nul`, `nulls`, `tru`, `01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `"abc`, `"\x"`, `"\u12"`, `"\u12g4"`,
		`{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{,}`, `[1,]`, `[,1]`, `[1 2]`, `{"a":1 "b":2}`, `{1:2}`, `[}`, `{]`,
		`[1]]`, `{} {}`, `'a'`, `"a"x`, `{"a":1]`, `[1}`,
		strings.Repeat("[", jsonscan.MaxDepth+1) + strings.Repeat("]", jsonscan.MaxDepth+1),
	}
	for _, doc := range good {
		if err := valid(doc); err != nil {
			t.Errorf("%q: %v", doc, err)
		}
	}
	for _, doc := range bad {
		err := valid(doc)
		var se *jsonscan.SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: accepted (err %v)", doc, err)
		}
	}
	deep := strings.Repeat("[", jsonscan.MaxDepth) + strings.Repeat("]", jsonscan.MaxDepth)
	if err := valid(deep); err != nil {
		t.Errorf("depth %d: %v", jsonscan.MaxDepth, err)
	}
}

func TestStr(t *testing.T) {
	tests := []struct{ in, want string }{
		{`"plain"`, "plain"},
		{`""`, ""},
		{`null`, ""},
		{`"a\nb\tc\rd\be\ff\/g\\h\"i"`, "a\nb\tc\rd\be\ff/g\\h\"i"},
		{`"\u0041\u00e9\u4e2d"`, "Aé中"},
		{`"\ud83d\ude00!"`, "😀!"},
		{`"\ud83d"`, "\uFFFD"},
		{`"\ude00x"`, "\uFFFDx"},
		{`"\ud83d\u0041"`, "\uFFFDA"},
		{`"héllo wörld"`, "héllo wörld"},
		{`"long run then \n escape then long run"`, "long run then \n escape then long run"},
	}
	var s jsonscan.Scanner
	for _, tt := range tests {
		s.Reset([]byte(tt.in))
		got := s.Str()
		s.End()
		if s.Err() != nil || string(got) != tt.want {
			t.Errorf("%s: got %q, %v; want %q", tt.in, got, s.Err(), tt.want)
		}
	}
	s.Reset([]byte(`12`))
	s.Str()
	if s.Err() == nil {
		t.Error("number read as string")
	}
}

// TestStrLengths moves an escape and the closing quote across the scanner's short-string
// fast path boundary and checks the result against encoding/json.
func TestStrLengths(t *testing.T) {
	var s jsonscan.Scanner
	for n := 0; n < 70; n++ {
		for esc := -1; esc < n; esc++ {
			raw := []byte(strings.Repeat("a", n))
			doc := `"` + string(raw) + `"`
			if esc >= 0 {
				doc = `"` + string(raw[:esc]) + `\n` + string(raw[esc:]) + `"`
			}
			var want string
			if err := json.Unmarshal([]byte(doc), &want); err != nil {
				t.Fatal(err)
			}
			s.Reset([]byte(doc + ` `))
			got := s.Str()
			s.End()
			if s.Err() != nil || string(got) != want {
				t.Fatalf("%s: got %q, %v", doc, got, s.Err())
			}
			s.Reset([]byte(doc[:len(doc)-1]))
			if s.Str(); s.Err() == nil {
				t.Fatalf("%s without its closing quote accepted", doc)
			}
		}
	}
}

func TestInt(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{`0`, 0, true}, {`42`, 42, true}, {`-7`, -7, true}, {`null`, 0, true},
		{`123456789012345678`, 123456789012345678, true},
		{`1e3`, 1000, true}, {`2.9`, 2, true},
		{`1e30`, 0, false}, {`"1"`, 0, false}, {`true`, 0, false},
	}
	var s jsonscan.Scanner
	for _, tt := range tests {
		s.Reset([]byte(tt.in))
		got := s.Int()
		s.End()
		if (s.Err() == nil) != tt.ok || got != tt.want {
			t.Errorf("%s: got %d, %v", tt.in, got, s.Err())
		}
	}
}

func TestWalk(t *testing.T) {
	doc := `{"id":"x","n":3,"ok":true,"skip":{"deep":[1,{"a":null}]},"list":["a","b\u0021"],"z":null}`
	var s jsonscan.Scanner
	s.Reset([]byte(doc))
	var id string
	var n int64
	var ok bool
	var list []string
	for more := s.Object(); more; more = s.More() {
		switch string(s.Key()) {
		case "id":
			id = string(s.Str())
		case "n":
			n = s.Int()
		case "ok":
			ok = s.Bool()
		case "list":
			for m := s.Array(); m; m = s.More() {
				list = append(list, string(s.Str()))
			}
		case "z":
			if !s.Null() {
				t.Error("z not null")
			}
		default:
			s.Skip()
		}
	}
	s.End()
	if s.Err() != nil || id != "x" || n != 3 || !ok || strings.Join(list, ",") != "a,b!" {
		t.Fatalf("got %q %d %v %q, %v", id, n, ok, list, s.Err())
	}
}

func TestErrorIsSticky(t *testing.T) {
	var s jsonscan.Scanner
	s.Reset([]byte(`{"a":x}`))
	more := s.Object()
	s.Key()
	s.Int()
	first := s.Err()
	if first == nil || !more {
		t.Fatalf("no error")
	}
	if s.More() || s.Str() != nil || s.Int() != 0 || s.Err() != first {
		t.Fatal("calls after an error did something")
	}
	if !strings.Contains(first.Error(), "jsonscan: ") || !strings.Contains(first.Error(), "offset 5") {
		t.Fatalf("message %q", first)
	}
}

func TestNoAllocs(t *testing.T) {
	doc := []byte(`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"a\nb"},"finish_reason":null}],"usage":null}`)
	var s jsonscan.Scanner
	s.Reset(doc)
	s.Skip() // warm up the buffers
	allocs := testing.AllocsPerRun(100, func() {
		s.Reset(doc)
		s.Skip()
		if s.Err() != nil {
			t.Fatal(s.Err())
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per document", allocs)
	}
}

// FuzzSkip checks the scanner against encoding/json: it accepts every document json.Valid
// accepts (up to MaxDepth), rejects the others except for its documented leniency about
// control characters, and unescapes strings the same way.
func FuzzSkip(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,2,{"b":null}],"c":"d\u00e9\n"}`, `[1e5,-0.5,true,false]`, `"\ud83d\ude00"`, `{"a":1,}`, `"\u12"`, `01`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var s jsonscan.Scanner
		s.Reset(in)
		s.Skip()
		s.End()
		err := s.Err()
		ok := json.Valid(in)
		hasCtl := bytes.ContainsFunc(in, func(r rune) bool { return r < 0x20 })
		switch {
		case ok && err != nil:
			if !strings.Contains(err.Error(), "nesting too deep") {
				t.Fatalf("rejected valid JSON %q: %v", in, err)
			}
		case !ok && err == nil && !hasCtl:
			t.Fatalf("accepted invalid JSON %q", in)
		}
		// The same bytes as a string value.
		if ok && len(in) > 0 && in[0] == '"' && utf8.Valid(in) {
			var want string
			if json.Unmarshal(in, &want) == nil {
				s.Reset(in)
				got := s.Str()
				if s.Err() != nil || string(got) != want {
					t.Fatalf("Str(%q) = %q, %v; want %q", in, got, s.Err(), want)
				}
			}
		}
	})
}

// TestTextOutlivesScanner reads thousands of strings of every size, some escaped, through
// one Scanner whose input buffer is overwritten after each document, and checks that every
// string read earlier still holds its value: Text's shared chunks are never rewritten.
func TestTextOutlivesScanner(t *testing.T) {
	var s jsonscan.Scanner
	var kept, want []string
	buf := make([]byte, 0, 8192)
	for i := range 3000 {
		v := strings.Repeat(string(rune('a'+i%26)), i%1500)
		if i%7 == 0 {
			v += "\n\"é"
		}
		enc, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		buf = append(buf[:0], `{"k":`...)
		buf = append(buf, enc...)
		buf = append(buf, `,"n":null}`...)
		s.Reset(buf)
		s.Object()
		s.Key()
		kept = append(kept, s.Text())
		s.More()
		s.Key()
		if got := s.Text(); got != "" {
			t.Fatalf("null read as %q", got)
		}
		s.More()
		s.End()
		if s.Err() != nil {
			t.Fatal(s.Err())
		}
		want = append(want, v)
		for j := range buf {
			buf[j] = 'X' // the caller reuses its buffer
		}
	}
	for i := range kept {
		if kept[i] != want[i] {
			t.Fatalf("string %d changed: got %d bytes %.20q, want %d bytes %.20q", i, len(kept[i]), kept[i], len(want[i]), want[i])
		}
	}
}

func TestTextSharesAllocations(t *testing.T) {
	doc := []byte(`["gpt-4o-mini","You are terse.","Say hello to the team and wish them a good week."]`)
	var s jsonscan.Scanner
	allocs := testing.AllocsPerRun(100, func() {
		s.Reset(doc)
		for more := s.Array(); more; more = s.More() {
			_ = s.Text()
		}
		if s.Err() != nil {
			t.Fatal(s.Err())
		}
	})
	if allocs > 1 {
		t.Fatalf("%v allocations for three short strings; want at most one chunk", allocs)
	}
}

// TestUseText: Text fills the caller's buffer first, without allocating, and then
// allocates chunks of its own; what it appended to the buffer is never rewritten.
func TestUseText(t *testing.T) {
	doc := []byte(`["gpt-4o-mini","You are terse.","Say hello to the team and wish them a good week.","` +
		strings.Repeat("x", 40) + `"]`)
	want := []string{"gpt-4o-mini", "You are terse.", "Say hello to the team and wish them a good week.", strings.Repeat("x", 40)}
	buf := make([]byte, 3, 80) // what the caller already holds stays
	copy(buf, "abc")
	var s jsonscan.Scanner
	var got []string
	allocs := testing.AllocsPerRun(1, func() {
		got = got[:0]
		s.Reset(doc)
		s.UseText(buf)
		for more := s.Array(); more; more = s.More() {
			got = append(got, s.Text())
			if len(got) == 3 {
				break
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations for three strings that fit the buffer", allocs)
	}
	s.More()
	got = append(got, s.Text()) // no room left: a chunk of its own
	s.More()
	s.End()
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q", got)
	}
	if string(buf[:3]) != "abc" || string(buf[3:3+len(want[0])]) != want[0] {
		t.Fatalf("buffer holds %q", buf[:cap(buf)])
	}
	for i := range buf[:cap(buf)] {
		buf[:cap(buf)][i] = 'Z' // the strings are in the buffer: the caller must not do this
	}
	if got[3] != want[3] {
		t.Fatalf("the string past the buffer changed: %q", got[3])
	}
}

// TestDeepNesting walks objects and arrays nested to MaxDepth, alternating, and checks
// that each closing bracket matches its own opening one at every depth.
func TestDeepNesting(t *testing.T) {
	var open, close strings.Builder
	for d := range jsonscan.MaxDepth {
		if d%3 == 0 {
			open.WriteString(`{"k":`)
			close.WriteString("}")
		} else {
			open.WriteString("[")
			close.WriteString("]")
		}
	}
	c := []byte(close.String())
	for i, j := 0, len(c)-1; i < j; i, j = i+1, j-1 {
		c[i], c[j] = c[j], c[i]
	}
	doc := open.String() + "0" + string(c)
	if err := valid(doc); err != nil {
		t.Fatalf("depth %d: %v", jsonscan.MaxDepth, err)
	}
	for _, at := range []int{0, 63, 64, 65, 200, len(c) - 1} {
		bad := []byte(string(c))
		if bad[at] == '}' {
			bad[at] = ']'
		} else {
			bad[at] = '}'
		}
		if err := valid(open.String() + "0" + string(bad)); err == nil {
			t.Errorf("a mismatched bracket at %d accepted", at)
		}
	}
}
