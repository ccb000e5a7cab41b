package pricing_test

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/llmclient/llmclient/pricing"
)

// usd parses an exact decimal dollar amount, "0.5150025", into Money.
func usd(s string) pricing.Money {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic("usd: bad amount " + s)
	}
	r.Mul(r, new(big.Rat).SetInt64(int64(pricing.Dollar)))
	if !r.IsInt() || !r.Num().IsInt64() {
		panic("usd: not a whole number of picodollars: " + s)
	}
	return pricing.Money(r.Num().Int64())
}

// lookup returns a model of the shipped snapshot, failing the test when it is missing.
func lookup(t testing.TB, provider, model string) *pricing.Model {
	t.Helper()
	m, ok := pricing.Default().Lookup(provider, model)
	require.True(t, ok, "Lookup(%q, %q)", provider, model)
	return m
}
