package gemini_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/llmclient/llmclient/provider/gemini"
)

// FuzzEstimateBodyTokens feeds arbitrary request bodies to the estimate the transport
// makes: it must never panic, never return a negative count, and succeed only on JSON.
func FuzzEstimateBodyTokens(f *testing.F) {
	for _, name := range []string{"simple.json", "tool_round_trip.json", "cross_vendor.json"} {
		body, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
	}
	f.Add([]byte(`null`))
	f.Add([]byte(`{"messages":7}`))
	f.Add([]byte(`{"contents":[{"parts":[{"text":"\u0000\xff"}]}],"system":[{"type":"text"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		n, err := gemini.EstimateBodyTokens(body, nil)
		if n < 0 {
			t.Fatalf("EstimateBodyTokens = %d, %v", n, err)
		}
		if err == nil && !json.Valid(body) {
			t.Fatalf("estimated %d tokens for a body that is not JSON", n)
		}
	})
}
