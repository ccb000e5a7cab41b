package headers

// lower maps an ASCII upper-case letter to lower case and leaves every other byte alone.
func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// equalFold reports whether s equals the lower-case ASCII word t, ignoring ASCII case.
func equalFold(s, t string) bool {
	return len(s) == len(t) && hasPrefixFold(s, t)
}

// hasPrefixFold reports whether s starts with the lower-case ASCII word t, ignoring case.
func hasPrefixFold(s, t string) bool {
	if len(s) < len(t) {
		return false
	}
	for i := 0; i < len(t); i++ {
		if lower(s[i]) != t[i] {
			return false
		}
	}
	return true
}

// indexFold returns the index of the first occurrence of the lower-case ASCII phrase t in s
// at or after from, ignoring ASCII case, or -1.
func indexFold(s, t string, from int) int {
	if t == "" {
		return from
	}
	first := t[0]
	for i := from; i+len(t) <= len(s); i++ {
		if lower(s[i]) == first && hasPrefixFold(s[i:], t) {
			return i
		}
	}
	return -1
}

// ContainsFold reports whether s contains the lower-case ASCII phrase t, ignoring ASCII
// case: the adapters use it to recognize vendor error messages ("context length",
// "overloaded") whatever their capitalization. An empty t is always contained.
func ContainsFold(s, t string) bool { return indexFold(s, t, 0) >= 0 }
