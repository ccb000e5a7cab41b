package llmgateway

import (
	"net/http"
	"testing"

	"github.com/llmclient/llmclient/ratelimit"
)

// TestRequestPriorityReadsWithoutAllocating: the priority header is read on every
// request, so reading it costs no allocation, whatever it holds.
func TestRequestPriorityReadsWithoutAllocating(t *testing.T) {
	for _, tc := range []struct {
		v    []string
		want ratelimit.Priority
		ok   bool
	}{
		{nil, ratelimit.Interactive, true}, {[]string{"BaTcH"}, ratelimit.Batch, true},
		{[]string{"interactive"}, ratelimit.Interactive, true}, {[]string{"urgent"}, ratelimit.Interactive, false},
	} {
		h := http.Header{}
		if tc.v != nil {
			h[priorityKey] = tc.v
		}
		var p ratelimit.Priority
		var ok bool
		if n := testing.AllocsPerRun(100, func() { p, ok = requestPriority(h) }); n != 0 {
			t.Errorf("%q: %v allocations", tc.v, n)
		}
		if p != tc.want || ok != tc.ok {
			t.Errorf("%q: %v %v, want %v %v", tc.v, p, ok, tc.want, tc.ok)
		}
	}
}
