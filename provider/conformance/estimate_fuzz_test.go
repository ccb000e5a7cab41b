package conformance_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	estimatepkg "github.com/llmclient/llmclient/estimate"
	"github.com/llmclient/llmclient/provider/anthropic"
	"github.com/llmclient/llmclient/provider/gemini"
)

// FuzzEstimateBodyTokens feeds arbitrary request bodies to the estimates the transport
// makes of Messages and GenerateContent bodies: they must never panic, never return a
// negative count, and succeed only on a JSON object, as documented.
func FuzzEstimateBodyTokens(f *testing.F) {
	for _, dir := range []string{"anthropic", "gemini"} {
		for _, name := range []string{"simple.json", "tool_round_trip.json", "cross_vendor.json"} {
			body, err := os.ReadFile(filepath.Join("..", dir, "testdata", name))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(body)
		}
	}
	f.Add([]byte(`null`))
	f.Add([]byte(`{"messages":7}`))
	f.Add([]byte(`{"contents":[{"parts":[{"text":"\u0000\xff"}]}],"system":[{"type":"text"}]}`))
	estimators := map[string]func([]byte, estimatepkg.Estimator) (int, error){
		"anthropic": anthropic.EstimateBodyTokens,
		"gemini":    gemini.EstimateBodyTokens,
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for name, estimate := range estimators {
			n, err := estimate(body, nil)
			if n < 0 {
				t.Fatalf("%s: EstimateBodyTokens = %d, %v", name, n, err)
			}
			if err == nil && (!json.Valid(body) || !bytes.HasPrefix(bytes.TrimSpace(body), []byte("{"))) {
				t.Fatalf("%s: estimated %d tokens for a body that is not a JSON object", name, n)
			}
		}
	})
}
