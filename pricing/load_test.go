package pricing_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient/pricing"
)

// userFile is a price file a user could write or download: every construct of the shape.
const userFile = `[
{"id": "acme", "name": "Acme AI", "api_pattern": "https://api\\.acme\\.example",
 "model_match": {"starts_with": "acme-"}, "provider_match": {"equals": "acme-cloud"},
 "description": "ignored", "extractors": [{"ignored": true}],
 "models": [
  {"id": "acme-large", "name": "Acme Large", "context_window": 1000000,
   "match": {"or": [{"equals": "acme-large"}, {"and": [{"starts_with": "acme-large-"}, {"regex": "^(?!.*-beta$)acme-large-\\d{8}"}]}]},
   "prices": [
     {"prices": {"input_mtok": {"base": 2, "tiers": [{"start": 100000, "price": 4}, {"start": 50000, "price": 3}]},
                 "cache_read_mtok": 0.2, "cache_write_mtok": 2.5, "output_mtok": 8, "output_reasoning_mtok": 6,
                 "requests_kcount": 0.5, "web_searches_kcount": 10}},
     {"constraint": {"type": "start_date", "start_date": "2026-01-01"}, "prices": {"input_mtok": 1, "output_mtok": 4}},
     {"constraint": {"start_time": "22:00:00+02:00", "end_time": "04:00:00.5+02:00"}, "prices": {"input_mtok": 0.5, "output_mtok": 2}}
   ]},
  {"id": "acme-small", "match": {"ends_with": "-small"}, "context_window": null, "prices": {"input_mtok": 1e-1, "output_mtok": 0.000001}},
  {"id": "acme-ocr", "match": {"contains": "ocr"}, "prices": {"input_document_kpages": 1}},
  {"id": "acme-free", "match": {"equals": "acme-free"}, "prices": {}}
 ]}
]`

func TestLoadUserFile(t *testing.T) {
	tb, err := pricing.Load(strings.NewReader(userFile))
	require.NoError(t, err)
	large, ok := tb.Lookup("", "ACME-Large-20250101")
	require.True(t, ok)
	assert.Equal(t, "acme/acme-large", large.String())
	assert.Equal(t, "Acme Large", large.Name())
	assert.Equal(t, 1_000_000, large.ContextWindow())
	_, ok = tb.Lookup("acme", "acme-large-20250101-beta")
	assert.False(t, ok, "the lookahead excludes -beta")
	m, ok := tb.Lookup("Acme-Cloud", "acme-large")
	require.True(t, ok, "provider_match")
	assert.Same(t, large, m)

	// 2025-06-01 12:00 UTC: the unconstrained price. Tiers are sorted: above 50,000 prompt
	// tokens $3, above 100,000 $4.
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		tokens pricing.Tokens
		want   string
	}{
		{pricing.Tokens{Input: 50_000}, "0.1005"},    // 50,000 × $2 + $0.0005 request fee
		{pricing.Tokens{Input: 50_001}, "0.150503"},  // × $3
		{pricing.Tokens{Input: 100_001}, "0.400504"}, // × $4
		{pricing.Tokens{Input: 1000, CacheRead: 500, CacheWrite: 250, Output: 100, Reasoning: 40}, "0.002445"},
		// 250 uncached × $2 + 500 read × $0.20 + 250 written × $2.50 + 40 reasoning × $6 +
		// 60 visible × $8 (per MTok) + $0.0005
	}
	for _, c := range cases {
		got, err := large.Cost(c.tokens, at)
		require.NoError(t, err)
		assert.Equal(t, usd(c.want), got, "%+v: got %v", c.tokens, got)
	}
	// From 2026-01-01 UTC, $1 in; from 22:00 to 04:00:00.5 at UTC+2 (20:00 to 02:00:00.5 UTC),
	// $0.50, the last active price, whatever the date.
	oneM := pricing.Tokens{Input: 1_000_000}
	for _, c := range []struct {
		at   time.Time
		want string
	}{
		{time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), "1"},
		{time.Date(2026, 3, 1, 19, 59, 59, 0, time.UTC), "1"},
		{time.Date(2026, 3, 1, 20, 0, 0, 0, time.UTC), "0.5"},
		{time.Date(2025, 3, 1, 2, 0, 0, 499_999_999, time.UTC), "0.5"},
		{time.Date(2025, 3, 1, 2, 0, 0, 500_000_000, time.UTC), "4.0005"}, // unconstrained, above 100,000
	} {
		got, err := large.Cost(oneM, c.at)
		require.NoError(t, err)
		assert.Equal(t, usd(c.want), got, "at %v: got %v", c.at, got)
	}

	small, ok := tb.Lookup("acme", "acme-small")
	require.True(t, ok)
	assert.Equal(t, 0, small.ContextWindow())
	got, err := small.Cost(pricing.Tokens{Input: 1_000_000, Output: 1_000_000}, at)
	require.NoError(t, err)
	assert.Equal(t, usd("0.100001"), got, "1e-1 and 0.000001 parse exactly")

	ocr, _ := tb.Lookup("acme", "acme-ocr")
	_, err = ocr.Cost(pricing.Tokens{Input: 1}, at)
	assert.ErrorIs(t, err, pricing.ErrNotPerToken)
	free, _ := tb.Lookup("acme", "acme-free")
	got, err = free.Cost(pricing.Tokens{Input: 1, Output: 1}, at)
	assert.NoError(t, err)
	assert.Equal(t, pricing.Money(0), got)

	id, ok := tb.ProviderForURL("https://api.acme.example/v2")
	assert.True(t, ok)
	assert.Equal(t, "acme", id)
}

func TestLoadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prices.json")
	require.NoError(t, os.WriteFile(path, []byte(userFile), 0o600))
	tb, err := pricing.LoadFile(path)
	require.NoError(t, err)
	_, ok := tb.Lookup("acme", "acme-large")
	assert.True(t, ok)

	_, err = pricing.LoadFile(filepath.Join(t.TempDir(), "missing.json"))
	assert.ErrorIs(t, err, os.ErrNotExist)

	bad := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`[{"id":"p","api_pattern":"x","models":[{"id":"m","match":{"equals":"m"},"prices":{"input_mtok":-1}}]}]`), 0o600))
	_, err = pricing.LoadFile(bad)
	require.Error(t, err)
	assert.Contains(t, err.Error(), bad)
	assert.Contains(t, err.Error(), `provider "p": model "m": prices.input_mtok`)
}

func TestLoadShippedSnapshot(t *testing.T) {
	tb, err := pricing.LoadFile("data/prices.json")
	require.NoError(t, err)
	m, ok := tb.Lookup("openai", "gpt-4o-mini")
	require.True(t, ok)
	assert.NotSame(t, lookup(t, "openai", "gpt-4o-mini"), m, "a loaded table is independent of Default")
	got, err := m.Cost(pricing.Tokens{Input: 1500, Output: 500}, noon)
	require.NoError(t, err)
	assert.Equal(t, usd("0.000525"), got)
}

func TestLoadMalformed(t *testing.T) {
	// provider wraps models in a provider; model wraps a model's fields.
	provider := func(models string) string {
		return `[{"id":"p","api_pattern":"https://p","models":[` + models + `]}]`
	}
	model := func(fields string) string {
		return provider(`{"id":"m","match":{"equals":"m"},` + fields + `}`)
	}
	cases := []struct {
		name, file, want string
	}{
		{"empty", ``, "want a JSON list of providers"},
		{"not a list", `{"id":"p"}`, "want a JSON list of providers"},
		{"null", `null`, "got null"},
		{"trailing data", `[] []`, "data after the JSON value"},
		{"truncated", `[{"id":"p"`, "want a JSON list of providers"},
		{"provider not an object", `[1]`, "provider #0"},
		{"provider without id", `[{"models":[]}]`, "provider #0: id is missing"},
		{"provider without models", `[{"id":"p","api_pattern":"x"}]`, `provider "p": models is missing`},
		{"duplicate provider", `[{"id":"p","api_pattern":"x","models":[]},{"id":"p","api_pattern":"x","models":[]}]`, `provider "p" appears twice`},
		{"bad api_pattern", `[{"id":"p","api_pattern":"(","models":[]}]`, `provider "p": api_pattern`},
		{"bad model_match", `[{"id":"p","api_pattern":"x","model_match":{"sounds_like":"x"},"models":[]}]`, `model_match: unknown clause "sounds_like"`},
		{"model without id", provider(`{"match":{"equals":"m"},"prices":{}}`), `provider "p": model #0: id is missing`},
		{"model id not a string", provider(`{"id":7,"match":{"equals":"m"},"prices":{}}`), `provider "p": model #0`},
		{"duplicate model", provider(`{"id":"m","match":{"equals":"m"},"prices":{}},{"id":"m","match":{"equals":"n"},"prices":{}}`), `model "m" appears twice`},
		{"no match", provider(`{"id":"m","prices":{}}`), `model "m": match is missing`},
		{"match with two keys", model(`"match":{"equals":"a","contains":"b"},"prices":{}`), "want exactly one key"},
		{"match value not a string", model(`"match":{"equals":1},"prices":{}`), "equals: want a string"},
		{"or not a list", model(`"match":{"or":{"equals":"a"}},"prices":{}`), "or: want a list"},
		{"nested error path", model(`"match":{"or":[{"equals":"a"},{"and":[{"regex":"("}]}]},"prices":{}`), "match: or[1]: and[0]: regex"},
		{"lookbehind", model(`"match":{"regex":"(?<!x)m"},"prices":{}`), "lookaround"},
		{"lookahead not leading", model(`"match":{"regex":"^m(?!x)"},"prices":{}`), "lookaround"},
		{"alternation after a lookahead", model(`"match":{"regex":"^(?!x)a|b"},"prices":{}`), "alternation"},
		{"unbalanced lookahead", model(`"match":{"regex":"^(?!x"},"prices":{}`), "unbalanced"},
		{"too deep", model(`"match":` + strings.Repeat(`{"or":[`, 40) + `{"equals":"m"}` + strings.Repeat(`]}`, 40) + `,"prices":{}`), "nested deeper"},
		{"context window fraction", model(`"context_window":1.5,"prices":{}`), "context_window"},
		{"context window negative", model(`"context_window":-1,"prices":{}`), "context_window"},
		{"context window huge", model(`"context_window":1e30,"prices":{}`), "context_window"},
		{"context window string", model(`"context_window":"8k","prices":{}`), "context_window"},
		{"no prices", model(`"name":"x"`), "prices is missing"},
		{"prices not an object", model(`"prices":3`), "want a price object or a list"},
		{"empty price list", model(`"prices":[]`), "the list is empty"},
		{"negative price", model(`"prices":{"input_mtok":-0.5}`), "prices.input_mtok"},
		{"price as a string", model(`"prices":{"output_mtok":"0.5"}`), "prices.output_mtok"},
		{"price null", model(`"prices":{"output_mtok":null}`), "prices.output_mtok"},
		{"price too large", model(`"prices":{"input_mtok":1e7}`), "in [0, 1,000,000], got 1e7"},
		{"price huge exponent", model(`"prices":{"input_mtok":1e999999999999}`), "prices.input_mtok"},
		{"tier bad start", model(`"prices":{"input_mtok":{"base":1,"tiers":[{"start":-1,"price":2}]}}`), "tiers[0].start"},
		{"tier fractional start", model(`"prices":{"input_mtok":{"base":1,"tiers":[{"start":0.5,"price":2}]}}`), "tiers[0].start"},
		{"tier missing price", model(`"prices":{"input_mtok":{"base":1,"tiers":[{"start":1}]}}`), "tiers[0].price"},
		{"tier unknown field", model(`"prices":{"input_mtok":{"base":1,"tiers":[{"start":1,"price":2,"end":9}]}}`), `unknown field "end"`},
		{"tiered without tiers", model(`"prices":{"input_mtok":{"base":1}}`), "tiers: want a list"},
		{"tiered unknown field", model(`"prices":{"input_mtok":{"base":1,"tiers":[],"cap":3}}`), `unknown field "cap"`},
		{"tiered request fee", model(`"prices":{"requests_kcount":{"base":1,"tiers":[]}}`), "requests_kcount"},
		{"list entry prices missing", model(`"prices":[{"constraint":null}]`), "prices[0].prices: want a price object"},
		{"list entry bad price", model(`"prices":[{"prices":{}},{"constraint":{"start_date":"2025-01-01"},"prices":{"output_mtok":-1}}]`), "prices[1].prices.output_mtok"},
		{"bad date", model(`"prices":[{"constraint":{"type":"start_date","start_date":"2025-02-30"},"prices":{}}]`), "prices[0].constraint: start_date"},
		{"date with time", model(`"prices":[{"constraint":{"start_date":"2025-02-03T00:00:00Z"},"prices":{}}]`), "start_date"},
		{"bad time", model(`"prices":[{"constraint":{"type":"time_of_date","start_time":"24:00:00Z","end_time":"01:00:00Z"},"prices":{}}]`), "start_time"},
		{"time without zone", model(`"prices":[{"constraint":{"start_time":"01:00:00","end_time":"02:00:00Z"},"prices":{}}]`), "start_time"},
		{"bad offset", model(`"prices":[{"constraint":{"start_time":"01:00:00+24:00","end_time":"02:00:00Z"},"prices":{}}]`), "start_time"},
		{"unknown constraint", model(`"prices":[{"constraint":{"type":"weekday","day":"mon"},"prices":{}}]`), "want a start_date or a time_of_date"},
		{"type and keys disagree", model(`"prices":[{"constraint":{"type":"time_of_date","start_date":"2025-01-01"},"prices":{}}]`), "want a start_date or a time_of_date"},
		{"extra constraint key", model(`"prices":[{"constraint":{"start_date":"2025-01-01","until":"2026-01-01"},"prices":{}}]`), "want a start_date or a time_of_date"},
	}
	for _, c := range cases {
		tb, err := pricing.Load(strings.NewReader(c.file))
		if assert.Error(t, err, c.name) {
			assert.Contains(t, err.Error(), c.want, c.name)
			assert.True(t, strings.HasPrefix(err.Error(), "pricing: "), "%s: %v", c.name, err)
		}
		assert.Nil(t, tb, c.name)
	}
}

func TestLoadBounded(t *testing.T) {
	_, err := pricing.Load(iotest.ErrReader(errors.New("disk on fire")))
	assert.ErrorContains(t, err, "disk on fire")

	// A reader that never ends is cut at MaxFileSize instead of filling memory.
	_, err = pricing.Load(&endless{})
	assert.ErrorContains(t, err, "larger than")
}

// endless yields spaces forever.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}
