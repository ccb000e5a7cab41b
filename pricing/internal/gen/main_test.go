package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCompact(t *testing.T) {
	src := `[
	  {"id": "p", "name": "P", "api_pattern": "https://p\\.example", "pricing_urls": ["https://p.example/pricing"],
	   "description": "dropped", "model_match": null, "provider_match": {"contains": "p"},
	   "extractors": [{"root": "usage"}], "fallback_model_providers": ["q"],
	   "models": [
	     {"id": "m", "name": "M", "description": "dropped", "deprecated": true,
	      "match": {"or": [{"equals": "m"}, {"regex": "^m-<\\d>&"}]}, "context_window": null,
	      "price_comments": "dropped",
	      "prices": {"input_mtok": 0.08333333333333334, "output_mtok": 1.50, "web_searches_kcount": 10}},
	     {"id": "n", "match": {"equals": "n"}, "context_window": 8192,
	      "prices": [{"prices": {}}, {"constraint": {"type": "start_date", "start_date": "2025-01-01"}, "prices": {"input_mtok": 1e-1}}]}
	   ]},
	  {"id": "q", "api_pattern": "q", "models": []}
	]`
	got, err := compact([]byte(src))
	require.NoError(t, err)
	want := `[
{"id":"p","name":"P","api_pattern":"https://p\\.example","provider_match":{"contains":"p"},"fallback_model_providers":["q"],"models":[
{"id":"m","name":"M","match":{"or":[{"equals":"m"},{"regex":"^m-<\\d>&"}]},"prices":{"input_mtok":0.08333333333333334,"output_mtok":1.50,"web_searches_kcount":10}},
{"id":"n","match":{"equals":"n"},"context_window":8192,"prices":[{"prices":{}},{"constraint":{"type":"start_date","start_date":"2025-01-01"},"prices":{"input_mtok":1e-1}}]}
]},
{"id":"q","api_pattern":"q","models":[
]}
]
`
	assert.Equal(t, want, string(got))
}

func TestRunChecksTheSnapshotLoads(t *testing.T) {
	dir := t.TempDir()
	in, out := dir+"/in.json", dir+"/out.json"
	require.NoError(t, os.WriteFile(in, []byte(`[{"id":"p","api_pattern":"x","models":[{"id":"m","match":{"equals":"m"},"prices":{"input_mtok":-1}}]}]`), 0o600))
	assert.ErrorContains(t, run(in, out), "does not load")
	_, err := os.Stat(out)
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing written")
	assert.ErrorContains(t, run("", out), "-in is required")
}

// TestSnapshotUpToDate regenerates the snapshot from the source named by $GENAI_PRICES and
// compares it with the committed file. CI has no source: the test is skipped there.
func TestSnapshotUpToDate(t *testing.T) {
	src := os.Getenv("GENAI_PRICES")
	if src == "" {
		t.Skip("GENAI_PRICES is not set")
	}
	out := t.TempDir() + "/prices.json"
	require.NoError(t, run(src, out))
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	committed, err := os.ReadFile("../../data/prices.json")
	require.NoError(t, err)
	assert.True(t, bytes.Equal(committed, got), "data/prices.json is not what the generator makes of %s", src)
}
