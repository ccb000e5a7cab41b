package openai

import "unsafe"

// unsafeStringData returns the address of s's bytes, to check that strings are shared.
func unsafeStringData(s string) *byte { return unsafe.StringData(s) }
