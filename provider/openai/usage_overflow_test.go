package openai_test

import (
	"math"
	"testing"

	"github.com/llmclient/llmclient/internal/providertest"
)

// A usage report whose counts add past the largest int (a lying or corrupt upstream)
// saturates instead of wrapping to a negative total; a negative count adds as 0.
func TestUsageTotalSaturates(t *testing.T) {
	for _, tc := range []struct {
		name, usage string
		want        int
	}{
		{"huge", `{"prompt_tokens":9223372036854775807,"completion_tokens":5}`, math.MaxInt},
		{"negative", `{"prompt_tokens":-9,"completion_tokens":5}`, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpstream(t, reply{Body: `{"id":"c","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":` + tc.usage + `}`})
			resp := providertest.Complete(t, newProvider(t, u), simpleCall("m"))
			if resp.Usage.TotalTokens != tc.want {
				t.Errorf("usage %+v: total %d, want %d", resp.Usage, resp.Usage.TotalTokens, tc.want)
			}
		})
	}
}
