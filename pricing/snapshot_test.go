package pricing_test

import (
	"bytes"
	"encoding/json"
	"math/big"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient/pricing"
)

// rawProvider is the snapshot read independently of the package, to check what it loaded.
type rawProvider struct {
	ID       string   `json:"id"`
	Fallback []string `json:"fallback_model_providers"`
	Models   []struct {
		ID            string          `json:"id"`
		ContextWindow int             `json:"context_window"`
		Match         any             `json:"match"`
		Prices        json.RawMessage `json:"prices"`
	} `json:"models"`
}

func readSnapshot(t *testing.T) []rawProvider {
	t.Helper()
	b, err := os.ReadFile("data/prices.json")
	require.NoError(t, err)
	var ps []rawProvider
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&ps))
	return ps
}

// TestSnapshotEveryModel checks that every provider and model of the shipped snapshot loads,
// that each model is found by a name its match tree names (its ID, where the tree accepts
// it: 57 IDs such as fireworks' "qwen3-235b-a22b", matched as
// "accounts/fireworks/models/…", are not names, for the data's engine either), and that each
// rate equals the decimal in the file.
func TestSnapshotEveryModel(t *testing.T) {
	ps := readSnapshot(t)
	require.Len(t, ps, 18)
	tb := pricing.Default()
	models, rounded := 0, 0
	for _, p := range ps {
		for _, rm := range p.Models {
			models++
			m, ok := tb.Lookup(p.ID, rm.ID)
			if !ok || m.ID() != rm.ID {
				name := literal(rm.Match)
				m, ok = tb.Lookup(p.ID, name)
				if !assert.True(t, ok && m.ID() == rm.ID, "%s/%s is found neither by its ID nor as %q (%v)", p.ID, rm.ID, name, m) {
					continue
				}
			}
			assert.Equal(t, p.ID+"/"+rm.ID, m.String())
			wantWindow := rm.ContextWindow
			if tieredAtOrAbove(rm.Prices, wantWindow) {
				wantWindow = 0 // a longer context the request opts into: see Model.ContextWindow
			}
			assert.Equal(t, wantWindow, m.ContextWindow(), m.String())
			var obj map[string]json.RawMessage
			if json.Unmarshal(rm.Prices, &obj) != nil {
				continue // a list of conditional prices: see TestCostTimeOfDay, TestCostStartDate
			}
			price, err := m.PriceAt(noon)
			if !hasTokenKey(obj) && len(obj) > 0 {
				assert.ErrorIs(t, err, pricing.ErrNotPerToken, m.String())
				continue
			}
			require.NoError(t, err, m.String())
			for key, r := range map[string]pricing.Rate{
				"input_mtok": price.Input, "cache_read_mtok": price.CacheRead,
				"cache_write_mtok": price.CacheWrite, "output_mtok": price.Output,
				"output_reasoning_mtok": price.Reasoning,
			} {
				raw, ok := obj[key]
				if !ok {
					if len(obj) > 0 || (key != "input_mtok" && key != "output_mtok") {
						assert.False(t, r.IsSet(), "%s %s", m, key)
					}
					continue
				}
				rounded += compareRate(t, m.String()+" "+key, raw, r)
			}
			if raw, ok := obj["requests_kcount"]; ok {
				assert.Equal(t, decimalMoney(t, raw, 1000), price.PerRequest, m.String())
			}
		}
	}
	assert.Equal(t, 1283, models)
	// Only the six OpenRouter cache-write rates written as 0.08333333333333334 (1/12) have
	// more decimals than a picodollar per token holds.
	assert.Equal(t, 6, rounded)
}

// literal returns the first string value of a match tree, a name the model usually
// accepts (unless an and-clause excludes it or an earlier model claims it).
func literal(tree any) string {
	switch n := tree.(type) {
	case map[string]any:
		for _, k := range []string{"equals", "starts_with", "contains", "ends_with"} {
			if s, ok := n[k].(string); ok {
				return s
			}
		}
		for _, k := range []string{"or", "and"} {
			if list, ok := n[k].([]any); ok {
				for _, c := range list {
					if s := literal(c); s != "" {
						return s
					}
				}
			}
		}
	}
	return ""
}

func hasTokenKey(obj map[string]json.RawMessage) bool {
	for _, k := range []string{"input_mtok", "cache_read_mtok", "cache_write_mtok", "output_mtok", "output_reasoning_mtok", "requests_kcount"} {
		if _, ok := obj[k]; ok {
			return true
		}
	}
	return false
}

// compareRate checks a loaded rate against its decimal text and returns 1 when the rate was
// rounded to a whole picodollar per token.
func compareRate(t *testing.T, what string, raw json.RawMessage, r pricing.Rate) int {
	t.Helper()
	require.True(t, r.IsSet(), what)
	var tiered struct {
		Base  json.Number `json:"base"`
		Tiers []struct {
			Start int         `json:"start"`
			Price json.Number `json:"price"`
		} `json:"tiers"`
	}
	if json.Unmarshal(raw, &tiered) != nil { // a flat rate
		return checkPerMTok(t, what, json.Number(bytes.TrimSpace(raw)), r.At(0))
	}
	n := checkPerMTok(t, what+" base", tiered.Base, r.At(0))
	got := r.Tiers()
	require.Len(t, got, len(tiered.Tiers), what)
	for i, tr := range tiered.Tiers {
		assert.Equal(t, tr.Start, got[i].Above, what)
		n += checkPerMTok(t, what+" tier", tr.Price, got[i].PerMTok)
		assert.Equal(t, got[i].PerMTok, r.At(tr.Start+1), what)
		if i == 0 {
			assert.Equal(t, r.At(0), r.At(tr.Start), what+": the threshold itself is below the tier")
		}
	}
	return n
}

// checkPerMTok compares Money per MTok with a decimal: equal, or off by less than half a
// picodollar per token (0.5 µ$ per MTok) for a decimal finer than that.
func checkPerMTok(t *testing.T, what string, dec json.Number, got pricing.Money) int {
	t.Helper()
	want, ok := new(big.Rat).SetString(dec.String())
	require.True(t, ok, what)
	want.Mul(want, new(big.Rat).SetInt64(int64(pricing.Dollar)))
	diff := new(big.Rat).Sub(want, new(big.Rat).SetInt64(int64(got)))
	if diff.Sign() == 0 {
		return 0
	}
	half := new(big.Rat).SetInt64(500_000) // half a picodollar per token, per million tokens
	assert.True(t, new(big.Rat).Abs(diff).Cmp(half) <= 0, "%s: %s vs %v", what, dec, got)
	return 1
}

// decimalMoney converts a decimal dollar amount divided by per into Money, exactly.
func decimalMoney(t *testing.T, raw json.RawMessage, per int64) pricing.Money {
	r, ok := new(big.Rat).SetString(string(bytes.TrimSpace(raw)))
	require.True(t, ok)
	r.Mul(r, big.NewRat(int64(pricing.Dollar), per))
	require.True(t, r.IsInt())
	return pricing.Money(r.Num().Int64())
}

// TestSnapshotSpotChecks compares rates with the numbers of the genai-prices source file.
func TestSnapshotSpotChecks(t *testing.T) {
	type rates struct{ in, cacheRead, cacheWrite, out string }
	cases := []struct {
		provider, model string
		prompt          int
		want            rates
	}{
		{"openai", "gpt-4o-mini", 0, rates{"0.15", "0.075", "", "0.6"}},
		{"openai", "gpt-4o", 0, rates{"2.5", "1.25", "", "10"}},
		{"anthropic", "claude-sonnet-4-5", 200_000, rates{"3", "0.3", "3.75", "15"}},
		{"anthropic", "claude-sonnet-4-5", 200_001, rates{"6", "0.6", "7.5", "22.5"}},
		{"anthropic", "claude-haiku-4-5", 0, rates{"1", "0.1", "1.25", "5"}},
		{"google", "gemini-2.5-pro", 1, rates{"1.25", "0.125", "", "10"}},
		{"google", "gemini-2.5-pro", 300_000, rates{"2.5", "0.25", "", "15"}},
		{"google", "gemini-1.5-flash", 0, rates{"0.075", "0.01875", "", "0.3"}},
		{"deepseek", "deepseek-chat", 0, rates{"0.27", "0.07", "", "1.1"}}, // noon UTC: standard
		{"aws", "amazon.nova-micro-v1:0", 0, rates{"0.035", "0.00875", "", "0.14"}},
		{"openrouter", "google/gemini-2.5-flash-lite", 0, rates{"0.1", "0.01", "0.083333", "0.4"}}, // 0.08333333333333334, rounded
	}
	for _, c := range cases {
		p, err := lookup(t, c.provider, c.model).PriceAt(noon)
		require.NoError(t, err)
		for _, r := range []struct {
			name string
			rate pricing.Rate
			want string
		}{{"input", p.Input, c.want.in}, {"cache read", p.CacheRead, c.want.cacheRead}, {"cache write", p.CacheWrite, c.want.cacheWrite}, {"output", p.Output, c.want.out}} {
			if r.want == "" {
				assert.False(t, r.rate.IsSet(), "%s/%s %s", c.provider, c.model, r.name)
				continue
			}
			assert.Equal(t, usd(r.want), r.rate.At(c.prompt), "%s/%s %s at %d prompt tokens", c.provider, c.model, r.name, c.prompt)
		}
	}
	// deepseek-v4-pro's list price from 2026-08-17: cache read 0.022; before: 0.003625.
	p, err := lookup(t, "deepseek", "deepseek-v4-pro").PriceAt(noon)
	require.NoError(t, err)
	assert.Equal(t, usd("0.003625"), p.CacheRead.At(0))
}

// tierStart finds the prompt sizes at which the tiers of a model's prices start.
var tierStart = regexp.MustCompile(`"start":\s*(\d+)`)

// tieredAtOrAbove reports whether any tier of prices starts at or above w (w > 0).
func tieredAtOrAbove(prices json.RawMessage, w int) bool {
	for _, m := range tierStart.FindAllSubmatch(prices, -1) {
		if n, err := strconv.Atoi(string(m[1])); err == nil && w > 0 && n >= w {
			return true
		}
	}
	return false
}
