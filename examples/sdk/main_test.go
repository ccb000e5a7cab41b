package sdk_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines. google.golang.org/genai imports
// go.opencensus.io, whose package init starts a worker that runs for the life of the
// process: it is not a leak of any test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}
