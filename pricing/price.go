package pricing

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Rate is the price of one kind of token in Money per million tokens, flat (PerMTok) or
// tiered by prompt size (Tiered). The zero Rate is unset: the kind of token is billed as its
// total is (see Price), which is not the same as a rate of zero. A Rate is a value; it is
// safe to copy and to share between goroutines.
type Rate struct {
	perMTok Money
	tiers   []Tier
	set     bool
}

// Tier changes a Rate for calls whose prompt has more than Above input tokens (Tokens.Input,
// cached tokens included). The tier's PerMTok then applies to every token of the kind, not
// only to the tokens above the threshold: the "cliff" model that genai-prices and the
// vendors use (Gemini 2.5 Pro input costs $1.25/MTok up to 200,000 prompt tokens and $2.50
// for each token of a larger prompt; its output rate follows the prompt size too).
type Tier struct {
	Above   int
	PerMTok Money
}

// PerMTok returns a flat rate of m per million tokens, e.g. PerMTok(15*Cent) for
// $0.15/MTok. PerMTok(0) prices a kind of token at zero (a self-hosted model).
func PerMTok(m Money) Rate { return Rate{perMTok: m, set: true} }

// Tiered returns a rate of base per million tokens that changes above the tiers' prompt
// sizes; the tiers are copied and sorted by Above, and the highest one the prompt exceeds
// applies.
func Tiered(base Money, tiers ...Tier) Rate {
	ts := slices.Clone(tiers)
	slices.SortStableFunc(ts, func(a, b Tier) int { return cmp.Compare(a.Above, b.Above) })
	return Rate{perMTok: base, tiers: ts, set: true}
}

// IsSet reports whether the rate was set (by PerMTok, Tiered or a price file).
func (r Rate) IsSet() bool { return r.set }

// At returns the rate per million tokens for a call whose prompt has promptTokens input
// tokens: the highest tier whose Above is less than promptTokens, else the base rate. An
// unset Rate returns 0.
func (r Rate) At(promptTokens int) Money {
	m := r.perMTok
	for _, t := range r.tiers {
		if promptTokens <= t.Above {
			break
		}
		m = t.PerMTok
	}
	return m
}

// Tiers returns a copy of the rate's tiers, sorted by Above; nil for a flat rate.
func (r Rate) Tiers() []Tier { return slices.Clone(r.tiers) }

// Price is one set of rates of a model. An unset rate falls back as the genai-prices data
// defines it: unset CacheRead and CacheWrite bill those tokens at the Input rate, unset
// CacheWrite1h bills one-hour writes at the CacheWrite rate (else the Input rate), unset
// Reasoning bills reasoning at the Output rate, and unset Input or Output do not charge
// those tokens at all (an embedding model has no output rate). Set every rate to PerMTok(0)
// for a free model; a Price with no rate set and no PerRequest fee is rejected by NewModel,
// so a forgotten price never reads as free.
type Price struct {
	// Input is the rate of uncached prompt tokens.
	Input Rate
	// CacheRead is the rate of prompt tokens read from the vendor's cache.
	CacheRead Rate
	// CacheWrite is the rate of prompt tokens written to the vendor's cache (Anthropic's
	// five-minute cache: 1.25 times the input rate).
	CacheWrite Rate
	// CacheWrite1h is the rate of prompt tokens written to Anthropic's one-hour cache (twice
	// the input rate; genai-prices' cache_write_1h_mtok).
	CacheWrite1h Rate
	// Output is the rate of generated tokens.
	Output Rate
	// Reasoning is the rate of reasoning tokens, where a model has its own.
	Reasoning Rate
	// PerRequest is a fee charged once per call (Perplexity's request fee); 0 for none.
	PerRequest Money
}

// maxPerMTok bounds every rate: $1,000,000 per million tokens, one dollar per token.
const maxPerMTok = 1_000_000 * Dollar

// perMillion is the number of tokens a per-MTok rate is quoted for.
const perMillion = 1_000_000

// rate is a Rate compiled for pricing: whole picodollars per token.
type rate struct {
	perToken Money
	tiers    []tier
	set      bool
}

type tier struct {
	above    int
	perToken Money
}

// at returns the per-token rate for a prompt of the given size.
func (r *rate) at(prompt int) Money {
	m := r.perToken
	if len(r.tiers) == 0 {
		return m
	}
	for i := range r.tiers {
		if prompt <= r.tiers[i].above {
			break
		}
		m = r.tiers[i].perToken
	}
	return m
}

func (r *rate) export() Rate {
	if !r.set {
		return Rate{}
	}
	out := Rate{perMTok: r.perToken * perMillion, set: true}
	for _, t := range r.tiers {
		out.tiers = append(out.tiers, Tier{Above: t.above, PerMTok: t.perToken * perMillion})
	}
	return out
}

// price is a Price compiled for pricing.
type price struct {
	input, cacheRead, cacheWrite, cacheWrite1h, output, reasoning rate
	perRequest                                                    Money
	// perToken is false for a price that the data gives only in other units (audio hours,
	// document pages, messages): such a model has no token cost this package can compute.
	perToken bool
	// flat is set (by prepare) for a per-token price whose input and output rates have no
	// tiers: a call of small tokens (Tokens.small) then costs
	// Input×flatIn + Output×flatOut + perRequest, which cost computes the long way. The
	// bounds prepare checks keep that sum below MaxMoney, so it never saturates.
	flat            bool
	flatIn, flatOut Money
}

// maxFlatRate and maxFlatFee bound the rates and the fee of a flat price: the loader's and
// NewModel's own bounds (at most $1/token, and a fee of at most $1,000,000). With fewer
// than smallTokens input and output tokens, Input×flatIn + Output×flatOut + perRequest is
// at most 2×(2²¹−1)×10¹² + 10¹⁸ < 5.2×10¹⁸, below MaxMoney (about 9.2×10¹⁸).
const (
	maxFlatRate = Money(1_000_000_000_000)
	maxFlatFee  = maxPerMTok
)

// prepare sets p.flat, flatIn and flatOut from p's rates. It is called once a price is
// compiled or parsed; a price it was not called for is priced the long way.
func (p *price) prepare() {
	in, out := Money(0), Money(0)
	if p.input.set {
		in = p.input.perToken
	}
	if p.output.set {
		out = p.output.perToken
	}
	p.flatIn, p.flatOut = in, out
	p.flat = p.perToken && len(p.input.tiers) == 0 && len(p.output.tiers) == 0 &&
		in >= 0 && in <= maxFlatRate && out >= 0 && out <= maxFlatRate &&
		p.perRequest >= 0 && p.perRequest <= maxFlatFee
}

// flatCost is cost for small tokens t of a flat price: the same amount, exactly.
func (p *price) flatCost(t Tokens) Money {
	return Money(t.Input)*p.flatIn + Money(t.Output)*p.flatOut + p.perRequest
}

// cost prices valid token counts. Parts of zero tokens cost nothing whatever their
// rate, and are skipped.
func (p *price) cost(t Tokens) Money {
	prompt := t.Input
	uncached := t.Input
	var c Money
	if t.CacheRead != 0 && p.cacheRead.set {
		c = mulTokens(t.CacheRead, p.cacheRead.at(prompt))
		uncached -= t.CacheRead
	}
	writes := t.CacheWrite // those not billed at a rate of their own yet
	if t.CacheWrite1h != 0 && p.cacheWrite1h.set {
		c = addCost(c, mulTokens(t.CacheWrite1h, p.cacheWrite1h.at(prompt)))
		writes -= t.CacheWrite1h
		uncached -= t.CacheWrite1h
	}
	if writes != 0 && p.cacheWrite.set {
		c = addCost(c, mulTokens(writes, p.cacheWrite.at(prompt)))
		uncached -= writes
	}
	if uncached != 0 && p.input.set {
		c = addCost(c, mulTokens(uncached, p.input.at(prompt)))
	}
	visible := t.Output
	if t.Reasoning != 0 && p.reasoning.set {
		c = addCost(c, mulTokens(t.Reasoning, p.reasoning.at(prompt)))
		visible -= t.Reasoning
	}
	if visible != 0 && p.output.set {
		c = addCost(c, mulTokens(visible, p.output.at(prompt)))
	}
	return addCost(c, p.perRequest)
}

func (p *price) export() Price {
	return Price{
		Input:        p.input.export(),
		CacheRead:    p.cacheRead.export(),
		CacheWrite:   p.cacheWrite.export(),
		CacheWrite1h: p.cacheWrite1h.export(),
		Output:       p.output.export(),
		Reasoning:    p.reasoning.export(),
		PerRequest:   p.perRequest,
	}
}

// compilePrice checks a hand-built Price and compiles it.
func compilePrice(p Price) (price, error) {
	out := price{perRequest: p.PerRequest, perToken: true}
	fields := []struct {
		name string
		in   Rate
		out  *rate
	}{
		{"Input", p.Input, &out.input},
		{"CacheRead", p.CacheRead, &out.cacheRead},
		{"CacheWrite", p.CacheWrite, &out.cacheWrite},
		{"CacheWrite1h", p.CacheWrite1h, &out.cacheWrite1h},
		{"Output", p.Output, &out.output},
		{"Reasoning", p.Reasoning, &out.reasoning},
	}
	priced := p.PerRequest != 0
	for _, f := range fields {
		if !f.in.set {
			continue
		}
		priced = true
		r, err := compileRate(f.in)
		if err != nil {
			return price{}, fmt.Errorf("Price.%s: %w", f.name, err)
		}
		*f.out = r
	}
	if p.PerRequest < 0 || p.PerRequest > maxPerMTok {
		return price{}, fmt.Errorf("Price.PerRequest %v is outside [$0, %v]", p.PerRequest, maxPerMTok)
	}
	if !priced {
		return price{}, errors.New("Price sets no rate (use PerMTok(0) for Input and Output to price a model at zero)")
	}
	out.prepare()
	return out, nil
}

func compileRate(r Rate) (rate, error) {
	base, err := perToken(r.perMTok)
	if err != nil {
		return rate{}, err
	}
	out := rate{perToken: base, set: true}
	for i, t := range r.tiers {
		if t.Above < 0 {
			return rate{}, fmt.Errorf("tier %d: Above %d is negative", i, t.Above)
		}
		m, err := perToken(t.PerMTok)
		if err != nil {
			return rate{}, fmt.Errorf("tier %d: %w", i, err)
		}
		out.tiers = append(out.tiers, tier{above: t.Above, perToken: m})
	}
	return out, nil
}

// perToken converts a rate per million tokens to whole picodollars per token.
func perToken(perMTok Money) (Money, error) {
	if perMTok < 0 || perMTok > maxPerMTok {
		return 0, fmt.Errorf("rate %v/MTok is outside [$0, %v]", perMTok, maxPerMTok)
	}
	if perMTok%perMillion != 0 {
		return 0, fmt.Errorf("rate %v/MTok is finer than one picodollar per token ($0.000001/MTok)", perMTok)
	}
	return perMTok / perMillion, nil
}
