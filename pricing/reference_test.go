package pricing_test

import (
	"encoding/csv"
	"errors"
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient/pricing"
)

// The usages and times of testdata/reference.csv, in the order of internal/gen/reference.mjs.
var (
	referenceUsages = []pricing.Tokens{
		{Input: 1500, Output: 500},
		{Input: 250000, CacheRead: 50000, CacheWrite: 10000, Output: 3000, Reasoning: 1000},
		{Input: 200000, Output: 10},
		{Input: 200001, CacheRead: 1, Output: 10},
		{Input: 272000, CacheWrite: 100, Output: 7},
	}
	referenceTimes = []string{"2025-01-01T00:29:59Z", "2025-06-10T00:30:00Z", "2026-08-17T02:00:00Z", "2026-09-01T05:00:00Z", "2027-03-01T16:30:00Z"}
)

// TestReferenceEngine compares lookups and prices with those of the data's own engine, the
// npm package @pydantic/genai-prices 0.1.8, recorded in testdata/reference.csv for every
// model of the snapshot (by ID, and on a sample in upper case, without a provider and with
// a dashless date) at five usages and five times. Differences by design:
//   - for a model found through fallback_model_providers the engine reports the provider
//     asked (azure), Model.Provider the one whose data priced it (openai);
//   - a model priced only in other units (audio hours, pages) costs $0 in the engine and
//     ErrNotPerToken here;
//   - rates finer than a picodollar per token are rounded (six OpenRouter cache-write rates),
//     and the engine computes in float64.
func TestReferenceEngine(t *testing.T) {
	f, err := os.Open("testdata/reference.csv")
	require.NoError(t, err)
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	require.Greater(t, len(rows), 1800)

	fallbacks := map[string][]string{}
	for _, p := range readSnapshot(t) {
		fallbacks[p.ID] = p.Fallback
	}
	tb := pricing.Default()
	var compared, notPerToken, exact int
	for _, r := range rows {
		prov, name, wantProv, wantModel, wantTotal := r[0], r[1], r[4], r[5], r[6]
		ui, _ := strconv.Atoi(r[2])
		ti, _ := strconv.Atoi(r[3])
		at, err := time.Parse(time.RFC3339, referenceTimes[ti])
		require.NoError(t, err)
		m, ok := tb.Lookup(prov, name)
		if wantModel == "-" {
			assert.False(t, ok, "Lookup(%q, %q) = %v; the engine finds nothing", prov, name, m)
			continue
		}
		if !assert.True(t, ok, "Lookup(%q, %q): the engine finds %s/%s", prov, name, wantProv, wantModel) {
			continue
		}
		assert.Equal(t, wantModel, m.ID(), "Lookup(%q, %q)", prov, name)
		if m.Provider() != wantProv {
			assert.Contains(t, fallbacks[wantProv], m.Provider(), "Lookup(%q, %q): provider", prov, name)
		}
		js, err := strconv.ParseFloat(wantTotal, 64)
		require.NoError(t, err)
		tokens := referenceUsages[ui]
		got, err := m.Cost(tokens, at)
		if errors.Is(err, pricing.ErrNotPerToken) {
			assert.Zero(t, js, "%s: the engine prices it", m)
			notPerToken++
			continue
		}
		require.NoError(t, err, m.String())
		// Float64 error of the engine, plus half a picodollar per token for rounded rates.
		tol := 1e-12*math.Max(1, js) + 0.5e-12*float64(tokens.Input+tokens.Output)
		assert.InDelta(t, js, got.Dollars(), tol, "%s at %s with %+v", m, referenceTimes[ti], tokens)
		if math.Abs(js-got.Dollars()) <= 1e-12*math.Max(1, js) {
			exact++
		}
		compared++
	}
	t.Logf("%d prices compared (%d equal to the engine's float64 within 1e-12 relative), %d not per token, %d rows", compared, exact, notPerToken, len(rows))
	assert.Greater(t, compared, 1400)
	assert.Greater(t, exact, compared-10)
}
