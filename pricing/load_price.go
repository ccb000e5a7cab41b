package pricing

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// parsePrices parses one price object or a list of conditional prices. Its errors start with
// the path below "prices", such as "[1].constraint: …" or ".input_mtok: …".
func parsePrices(v any) ([]conditional, error) {
	if obj, ok := v.(map[string]any); ok {
		p, err := parsePrice(obj)
		if err != nil {
			return nil, fmt.Errorf(".%w", err)
		}
		return []conditional{{kind: always, price: p}}, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf(": want a price object or a list of {constraint, prices}, got %s", snippet(v))
	}
	if len(list) == 0 {
		return nil, errors.New(": the list is empty")
	}
	out := make([]conditional, len(list))
	for i, e := range list {
		obj, err := object(e)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		if out[i], err = parseConstraint(obj["constraint"]); err != nil {
			return nil, fmt.Errorf("[%d].constraint: %w", i, err)
		}
		prices, ok := obj["prices"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("[%d].prices: want a price object, got %s", i, snippet(obj["prices"]))
		}
		if out[i].price, err = parsePrice(prices); err != nil {
			return nil, fmt.Errorf("[%d].prices.%w", i, err)
		}
	}
	return out, nil
}

// rateKeys are the per-token price keys this package prices.
var rateKeys = []string{"input_mtok", "cache_read_mtok", "cache_write_mtok", "cache_write_1h_mtok", "output_mtok", "output_reasoning_mtok"}

// parsePrice reads one price object. Its errors start with the key at fault.
func parsePrice(obj map[string]any) (price, error) {
	p := price{}
	for _, key := range rateKeys { // in a fixed order, so the first error is the same on every run
		v, ok := obj[key]
		if !ok {
			continue
		}
		r, err := parseRate(v)
		if err != nil {
			return price{}, fmt.Errorf("%s: %w", key, err)
		}
		p.perToken = true
		switch key {
		case "input_mtok":
			p.input = r
		case "cache_read_mtok":
			p.cacheRead = r
		case "cache_write_mtok":
			p.cacheWrite = r
		case "cache_write_1h_mtok":
			p.cacheWrite1h = r
		case "output_mtok":
			p.output = r
		case "output_reasoning_mtok":
			p.reasoning = r
		}
	}
	if v, ok := obj["requests_kcount"]; ok {
		fee, err := parseAmount(v, 9) // per thousand requests → picodollars per request
		if err != nil {
			return price{}, fmt.Errorf("requests_kcount: %w", err)
		}
		p.perRequest, p.perToken = Money(fee), true
	}
	if len(obj) == 0 { // {} is a free model in the data (":free" variants, Gemma)
		p.perToken = true
		p.input, p.output = rate{set: true}, rate{set: true}
	}
	p.prepare()
	return p, nil
}

// parseAmount reads a dollar amount in [0, 1,000,000] as picodollars per unit: scale 6
// turns a price per million tokens into picodollars per token, scale 9 a price per thousand
// requests into picodollars per request.
func parseAmount(v any, scale int) (int64, error) {
	n, ok := v.(json.Number)
	max := int64(1_000_000)
	for range scale {
		max *= 10
	}
	amount, _, err := parseDecimal(string(n), scale, max)
	if !ok || err != nil {
		return 0, fmt.Errorf("want a number of dollars in [0, 1,000,000], got %s", snippet(v))
	}
	return amount, nil
}

// parseRate reads a number or {"base": n, "tiers": [{"start": n, "price": n}, …]}.
func parseRate(v any) (rate, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		amount, err := parseAmount(v, 6)
		return rate{perToken: Money(amount), set: true}, err
	}
	for k := range obj {
		if k != "base" && k != "tiers" {
			return rate{}, fmt.Errorf("unknown field %q in tiered price", k)
		}
	}
	base, err := parseAmount(obj["base"], 6)
	if err != nil {
		return rate{}, fmt.Errorf("base: %w", err)
	}
	tiers, ok := obj["tiers"].([]any)
	if !ok {
		return rate{}, fmt.Errorf("tiers: want a list of {start, price}, got %s", snippet(obj["tiers"]))
	}
	r := rate{perToken: Money(base), set: true}
	for i, tv := range tiers {
		t, err := object(tv)
		if err != nil {
			return rate{}, fmt.Errorf("tiers[%d]: %w", i, err)
		}
		for k := range t {
			if k != "start" && k != "price" {
				return rate{}, fmt.Errorf("tiers[%d]: unknown field %q", i, k)
			}
		}
		n, isNumber := t["start"].(json.Number)
		start, exact, err := parseDecimal(string(n), 0, maxTokens)
		if !isNumber || err != nil || !exact {
			return rate{}, fmt.Errorf("tiers[%d].start: want a whole number of tokens in [0, %d], got %s", i, int64(maxTokens), snippet(t["start"]))
		}
		amount, err := parseAmount(t["price"], 6)
		if err != nil {
			return rate{}, fmt.Errorf("tiers[%d].price: %w", i, err)
		}
		r.tiers = append(r.tiers, tier{above: int(start), perToken: Money(amount)})
	}
	// The data's engine sorts tiers by start; a stable sort keeps equal starts in order.
	slices.SortStableFunc(r.tiers, func(a, b tier) int { return a.above - b.above })
	return r, nil
}
