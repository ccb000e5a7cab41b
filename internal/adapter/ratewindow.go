package adapter

import (
	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/headers"
)

// RateWindow is the quota dimension w, read from response headers, as the Client takes it.
func RateWindow(w headers.Window) llmclient.RateWindow {
	return llmclient.RateWindow{Known: w.Known, Limit: w.Limit, Remaining: w.Remaining, Reset: w.Reset}
}
