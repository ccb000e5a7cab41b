package adapter

import (
	"github.com/llmclient/llmclient/internal/headers"
	"github.com/llmclient/llmclient/ratelimit"
)

// RateWindow is the quota dimension w, read from response headers, as the Client takes it.
func RateWindow(w headers.Window) ratelimit.Window {
	return ratelimit.Window{Known: w.Known, Limit: w.Limit, Remaining: w.Remaining, Reset: w.Reset}
}
