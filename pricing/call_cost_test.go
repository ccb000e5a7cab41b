package pricing_test

import (
	"testing"

	"github.com/llmclient/llmclient/pricing"
)

func TestCostPlusAndString(t *testing.T) {
	m, err := pricing.NewModel(pricing.Spec{ID: "m", Price: pricing.Price{Input: pricing.PerMTok(pricing.Dollar)}})
	if err != nil {
		t.Fatal(err)
	}
	n, err := pricing.NewModel(pricing.Spec{ID: "n", Price: pricing.Price{Input: pricing.PerMTok(pricing.Dollar)}})
	if err != nil {
		t.Fatal(err)
	}
	refusal := pricing.Cost{Known: true}
	for _, tc := range []struct {
		name string
		got  pricing.Cost
		want pricing.Cost
		str  string
	}{
		{"known + known", pricing.Cost{Amount: 2, Known: true, Model: m}.Plus(pricing.Cost{Amount: 3, Known: true, Model: m}),
			pricing.Cost{Amount: 5, Known: true, Model: m}, "$0.000000000005"},
		{"a refusal keeps the model", pricing.Cost{Amount: 2, Known: true, Model: m}.Plus(refusal),
			pricing.Cost{Amount: 2, Known: true, Model: m}, "$0.000000000002"},
		{"two models: none", pricing.Cost{Amount: 2, Known: true, Model: m}.Plus(pricing.Cost{Amount: 1, Known: true, Model: n}),
			pricing.Cost{Amount: 3, Known: true}, "$0.000000000003"},
		{"unknown part", pricing.Cost{Amount: pricing.Cent, Known: true, Model: m}.Plus(pricing.Cost{}),
			pricing.Cost{Amount: pricing.Cent}, "≥$0.01"},
		{"estimated", refusal.Plus(pricing.Cost{Amount: pricing.Cent, Known: true, Estimated: true}),
			pricing.Cost{Amount: pricing.Cent, Known: true, Estimated: true}, "~$0.01"},
		{"saturates", pricing.Cost{Amount: pricing.MaxMoney, Known: true}.Plus(pricing.Cost{Amount: pricing.MaxMoney, Known: true}),
			pricing.Cost{Amount: pricing.MaxMoney, Known: true}, "$9223372.036854775807"},
		{"negative parts count as 0", pricing.Cost{Amount: -5, Known: true}.Plus(pricing.Cost{Amount: 1, Known: true}),
			pricing.Cost{Amount: 1, Known: true}, "$0.000000000001"},
		{"the zero Cost is unknown", pricing.Cost{}, pricing.Cost{}, "unknown"},
	} {
		if tc.got != tc.want || tc.got.String() != tc.str {
			t.Errorf("%s: %+v (%s), want %+v (%s)", tc.name, tc.got, tc.got, tc.want, tc.str)
		}
	}
}
