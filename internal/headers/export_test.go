package headers

import (
	"net/http"
	"time"
)

// ReadWindow reads one quota dimension by a lookup per header name: the oracle the tests
// hold ReadWindows to.
func ReadWindow(h http.Header, limitKey, remainingKey, resetKey string, now time.Time) Window {
	if h == nil {
		return Window{}
	}
	return parseWindow(Value(h, limitKey), Value(h, remainingKey), Value(h, resetKey), now)
}
