package pricing

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// matchOp is the kind of a match-tree node.
type matchOp uint8

const (
	opEquals matchOp = iota
	opStartsWith
	opEndsWith
	opContains
	opRegex
	opOr
	opAnd
)

// maxMatchDepth bounds the nesting of a match tree; the real data nests three levels.
const maxMatchDepth = 32

// matcher is a compiled genai-prices match tree. Like the data's own engine, it is evaluated
// against the lower-cased, trimmed model name: string clauses compare with their values
// lower-cased at load, and regular expressions run case-sensitively on the lower-cased name.
type matcher struct {
	op  matchOp
	s   string         // lower-cased literal of a string clause
	re  *regexp.Regexp // regex clause: the expression after its leading lookaheads; nil matches all
	not []*regexp.Regexp
	sub []matcher // or, and
}

// match reports whether the lower-cased name satisfies the tree.
func (m *matcher) match(name string) bool {
	switch m.op {
	case opEquals:
		return name == m.s
	case opStartsWith:
		return strings.HasPrefix(name, m.s)
	case opEndsWith:
		return strings.HasSuffix(name, m.s)
	case opContains:
		return strings.Contains(name, m.s)
	case opRegex:
		for _, n := range m.not {
			if n.MatchString(name) {
				return false
			}
		}
		return m.re == nil || m.re.MatchString(name)
	case opOr:
		for i := range m.sub {
			if m.sub[i].match(name) {
				return true
			}
		}
		return false
	case opAnd:
		for i := range m.sub {
			if !m.sub[i].match(name) {
				return false
			}
		}
		return true
	}
	return false
}

var matchOps = map[string]matchOp{
	"equals": opEquals, "starts_with": opStartsWith, "ends_with": opEndsWith,
	"contains": opContains, "regex": opRegex, "or": opOr, "and": opAnd,
}

// parseMatch compiles one match-tree node: an object with exactly one of the keys equals,
// starts_with, ends_with, contains, regex (a string each), or and and (a list of nodes).
func parseMatch(v any, depth int) (matcher, error) {
	if depth > maxMatchDepth {
		return matcher{}, fmt.Errorf("nested deeper than %d levels", maxMatchDepth)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return matcher{}, fmt.Errorf("want an object with one of equals, starts_with, ends_with, contains, regex, or, and; got %s", snippet(v))
	}
	if len(obj) != 1 {
		return matcher{}, fmt.Errorf("want exactly one key, got %d in %s", len(obj), snippet(v))
	}
	var key string
	var val any
	for k, v := range obj {
		key, val = k, v
	}
	op, ok := matchOps[key]
	if !ok {
		return matcher{}, fmt.Errorf("unknown clause %q", key)
	}
	if op == opOr || op == opAnd {
		list, ok := val.([]any)
		if !ok {
			return matcher{}, fmt.Errorf("%s: want a list of clauses, got %s", key, snippet(val))
		}
		m := matcher{op: op, sub: make([]matcher, len(list))}
		for i, c := range list {
			sub, err := parseMatch(c, depth+1)
			if err != nil {
				return matcher{}, fmt.Errorf("%s[%d]: %w", key, i, err)
			}
			m.sub[i] = sub
		}
		return m, nil
	}
	s, ok := val.(string)
	if !ok {
		return matcher{}, fmt.Errorf("%s: want a string, got %s", key, snippet(val))
	}
	if op != opRegex {
		return matcher{op: op, s: strings.ToLower(s)}, nil
	}
	re, not, err := compileRegex(s)
	if err != nil {
		return matcher{}, fmt.Errorf("regex %q: %w", s, err)
	}
	return matcher{op: opRegex, re: re, not: not}, nil
}

// compileRegex compiles a JavaScript regular expression of the data for Go's RE2 engine,
// which has no lookaround. The data excludes names with leading negative lookaheads, as in
// "^(?!.*-tts(?:$|-))": ^(?!A)(?!B)R matches where neither ^(?:A) nor ^(?:B) matches and ^R
// does. Lookaround anywhere else is an error, as is any syntax RE2 rejects.
func compileRegex(src string) (re *regexp.Regexp, not []*regexp.Regexp, err error) {
	rest := src
	if strings.HasPrefix(src, "^(?!") {
		rest = src[1:]
		for strings.HasPrefix(rest, "(?!") {
			end, err := closingParen(rest)
			if err != nil {
				return nil, nil, err
			}
			n, err := regexp.Compile("^(?:" + rest[3:end] + ")")
			if err != nil {
				return nil, nil, err
			}
			not = append(not, n)
			rest = rest[end+1:]
		}
		if topLevelAlternation(rest) {
			return nil, nil, errors.New("alternation after a leading lookahead is not supported")
		}
		if rest == "" {
			return nil, not, nil
		}
		rest = "^" + rest
	}
	for _, look := range []string{"(?=", "(?!", "(?<=", "(?<!"} {
		if strings.Contains(rest, look) {
			return nil, nil, errors.New("lookaround other than a leading ^(?!…) is not supported")
		}
	}
	re, err = regexp.Compile(rest)
	if err != nil {
		return nil, nil, err
	}
	return re, not, nil
}

// closingParen returns the index of the parenthesis closing the group that opens s,
// skipping escapes and character classes.
func closingParen(s string) (int, error) {
	if i := scanPattern(s, func(c byte, depth int) bool { return c == ')' && depth == 0 }); i >= 0 {
		return i, nil
	}
	return 0, errors.New("unbalanced parentheses")
}

// topLevelAlternation reports whether s has a | outside every group and class.
func topLevelAlternation(s string) bool {
	return scanPattern(s, func(c byte, depth int) bool { return c == '|' && depth == 0 }) >= 0
}

// scanPattern walks the bytes of the regular expression s that are neither escaped nor in
// a character class, with the group depth after each (a ')' closing a top-level group has
// depth 0), and returns the index of the first for which stop is true, or -1.
func scanPattern(s string, stop func(c byte, depth int) bool) int {
	depth, inClass := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			i++
		case inClass:
			inClass = c != ']'
		case c == '[':
			inClass = true
		default:
			switch c {
			case '(':
				depth++
			case ')':
				depth--
			}
			if stop(c, depth) {
				return i
			}
		}
	}
	return -1
}

// snippet shows the start of a decoded JSON value for an error message.
func snippet(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%T", v)
	}
	if len(b) > 60 {
		return string(b[:60]) + "…"
	}
	return string(b)
}
