package gemini

import (
	"strconv"
	"strings"
)

// Tool-call IDs. Gemini function calls usually carry no id, and Gemini 3 models attach a
// thought signature to the first function call of a turn that must be sent back with it.
// The common ToolCall has room for neither, so the adapter encodes both in ToolCall.ID:
//
//	call_<n>                          a call without id or signature (n counts the
//	                                  response's function calls from 0)
//	<id>                              a call with Gemini's own id
//	<call_<n> or id>__thought__<sig>  the same with its thought signature
//
// Callers treat the ID as opaque and echo it in the tool result, as with other vendors;
// the adapter splits it again when the conversation is replayed.

const sigSep = "__thought__"

func synthID(n int) string { return "call_" + strconv.Itoa(n) }

// isSynthetic reports whether id is a call_<n> ID the adapter made up; those are not sent
// to the API as function call ids.
func isSynthetic(id string) bool {
	n, ok := strings.CutPrefix(id, "call_")
	if !ok || n == "" {
		return id == ""
	}
	for i := 0; i < len(n); i++ {
		if n[i] < '0' || n[i] > '9' {
			return false
		}
	}
	return true
}

func joinID(id, sig string) string {
	if sig == "" {
		return id
	}
	return id + sigSep + sig
}

func splitID(id string) (base, sig string) {
	base, sig, _ = strings.Cut(id, sigSep)
	return base, sig
}
