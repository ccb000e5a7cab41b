package adapter

import "unicode/utf8"

// MaxMessageLen caps a vendor's error message copied into llmclient.Error.Message: 1 KiB,
// so that a hostile or broken server cannot make every log line a megabyte long.
const MaxMessageLen = 1024

// VendorMessage returns a vendor's error message fit for Error.Message: msg itself when it
// is at most MaxMessageLen bytes, else its start, cut at a rune boundary, and "…".
func VendorMessage(msg string) string {
	if len(msg) <= MaxMessageLen {
		return msg
	}
	cut := MaxMessageLen
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "…"
}
