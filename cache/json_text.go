package cache

// jsonText follows a JSON text byte by byte, to tell the bytes of its strings from the
// rest without parsing it.
type jsonText struct{ str, esc bool }

// inString reports whether c, the text's next byte, belongs to a string after its opening
// quote (its closing quote included).
func (t *jsonText) inString(c byte) bool {
	switch {
	case !t.str:
		t.str = c == '"'
		return false
	case t.esc:
		t.esc = false
	case c == '\\':
		t.esc = true
	case c == '"':
		t.str = false
	}
	return true
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
