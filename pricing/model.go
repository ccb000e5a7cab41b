package pricing

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// Model is one model's prices and context window, from a Table or built by hand with
// NewModel. A Model is immutable and safe for concurrent use; Tables hand out the same
// *Model to every caller.
type Model struct {
	provider      string
	id            string
	name          string
	contextWindow int
	// prices are the data's conditional prices in file order; the last active one applies.
	prices []conditional
	// span is the price last found active for a model of several prices, with the span
	// of time it stays active: calls within it skip the search (see active).
	span atomic.Pointer[activeSpan]
	// flat is the one price of a model of one flat price (price.flat), else nil: FlatCost
	// prices with it.
	flat *price
}

// activeSpan is a price of a Model and the span of time [from, until), in Unix
// nanoseconds, in which it is the active one.
type activeSpan struct {
	p           *price
	from, until int64
}

// Spec describes a model priced by hand: a negotiated rate, or a self-hosted model at zero.
type Spec struct {
	// Provider names who serves the model; optional, reported by Model.Provider.
	Provider string
	// ID names the model; required.
	ID string
	// Name is a display name; optional.
	Name string
	// ContextWindow is the model's context window in tokens; 0 means unknown.
	ContextWindow int
	// Price is the model's one price, valid at every time.
	Price Price
}

// ErrNotPerToken is returned by Cost and PriceAt for a model that the price data prices only
// in units this package does not count (audio hours, document pages, messages), such as
// whisper-1 or mistral-ocr: its cost is unknown, not zero.
var ErrNotPerToken = errors.New("pricing: model is not priced per token")

// ErrNoTime is returned by Cost and PriceAt for the zero time.Time: prices change with the
// date and, for some models, the time of day, so the time of the call is required.
var ErrNoTime = errors.New("pricing: the time of the call is required (got the zero time)")

// NewModel returns a model with one price valid at every time. It rejects an empty ID, a
// negative ContextWindow, and a Price that sets no rate, has a negative rate or tier
// threshold, a rate above $1,000,000/MTok, or a rate finer than one picodollar per token
// (more than six decimals of dollars per million tokens).
func NewModel(s Spec) (*Model, error) {
	if s.ID == "" {
		return nil, errors.New("pricing: NewModel: Spec.ID is empty")
	}
	if s.ContextWindow < 0 {
		return nil, fmt.Errorf("pricing: NewModel %q: ContextWindow %d is negative", s.ID, s.ContextWindow)
	}
	p, err := compilePrice(s.Price)
	if err != nil {
		return nil, fmt.Errorf("pricing: NewModel %q: %w", s.ID, err)
	}
	m := &Model{
		provider:      s.Provider,
		id:            s.ID,
		name:          s.Name,
		contextWindow: s.ContextWindow,
		prices:        []conditional{{kind: always, price: p}},
	}
	m.prepare()
	return m, nil
}

// prepare sets m.flat once m's prices are set.
func (m *Model) prepare() {
	if len(m.prices) == 1 && m.prices[0].price.flat {
		m.flat = &m.prices[0].price
	}
	// A rate tiered at or above the listed window prices a longer context that a request
	// opts into (Anthropic's 1M-token beta for Sonnet, listed at 200,000): the listed
	// window is then no limit of the model, and it is unknown.
	for _, c := range m.prices {
		p := &c.price
		for _, r := range []*rate{&p.input, &p.cacheRead, &p.cacheWrite, &p.cacheWrite1h, &p.output, &p.reasoning} {
			for _, t := range r.tiers {
				if m.contextWindow > 0 && t.above >= m.contextWindow {
					m.contextWindow = 0
				}
			}
		}
	}
}

// FlatCost is Cost for the common call, without a time and without an error, small
// enough for the compiler to inline: when m has one price (so the time of the call does
// not change it) whose input and output rates have no tiers, and t has no cache or
// reasoning tokens and fewer than 2,097,152 (2²¹) input and output tokens, neither
// negative, it returns what Cost returns for t at any time but the zero time, and true;
// otherwise 0 and false, and Cost prices t. It is safe for concurrent use.
func (m *Model) FlatCost(t Tokens) (Money, bool) {
	if p := m.flat; p != nil && t.small() {
		return p.flatCost(t), true
	}
	return 0, false
}

// WithPrice returns a copy of m, with the same provider, ID, name and context window, whose
// one price is p at every time: a negotiated rate for a model of the snapshot. It checks p
// as NewModel does.
func (m *Model) WithPrice(p Price) (*Model, error) {
	return NewModel(Spec{Provider: m.provider, ID: m.id, Name: m.name, ContextWindow: m.contextWindow, Price: p})
}

// Provider returns the ID of the provider whose data priced the model ("openai",
// "anthropic", …); for a lookup that fell back to another provider's models (Vertex AI
// serving Claude) it is that other provider. Hand-built models return Spec.Provider.
func (m *Model) Provider() string { return m.provider }

// ID returns the model's ID in the price data ("gpt-4o-mini"); several model names can
// match one ID ("gpt-4o-mini-2024-07-18" does).
func (m *Model) ID() string { return m.id }

// Name returns the model's display name, or "" when the data has none.
func (m *Model) Name() string { return m.name }

// ContextWindow returns the model's context window in tokens, or 0 when unknown: also
// when a price tier starts at or above the listed window (a longer context the request
// opts into, which the listed window does not bound).
func (m *Model) ContextWindow() int { return m.contextWindow }

// String returns "provider/id", or the ID alone when the provider is empty.
func (m *Model) String() string {
	if m.provider == "" {
		return m.id
	}
	return m.provider + "/" + m.id
}

// Cost returns the cost of one call with tokens t made at time at: the price active at that
// time (start dates, time-of-day windows), its tier for the call's prompt size, each kind of
// token at its rate, plus any per-call fee. The result is exact, saturating at MaxMoney.
// Cost fails with ErrInvalidTokens, ErrNoTime or ErrNotPerToken (wrapped), never with a
// silent zero; a free model costs $0 with a nil error. Cost does not allocate unless it
// fails or, for a model of several prices, at falls outside the span of time in which the
// price it last found stays active (a start date or a time-of-day edge passed: a few
// times a day at most for calls made now). It is safe for concurrent use.
func (m *Model) Cost(t Tokens, at time.Time) (Money, error) {
	small := t.small() // valid counts, and the common call: no cache or reasoning tokens
	if !small && !t.valid() {
		return 0, t.validate()
	}
	if at.IsZero() {
		return 0, ErrNoTime
	}
	p := &m.prices[0].price // priceAt, inlined by hand for a model of one price
	if len(m.prices) != 1 {
		p = m.active(at)
	}
	if small && p.flat { // what p.cost(t) gives, in two multiplications
		return p.flatCost(t), nil
	}
	if !p.perToken {
		return 0, m.notPerToken()
	}
	return p.cost(t), nil
}

// PriceAt returns the price active at time at, the one Cost would apply.
func (m *Model) PriceAt(at time.Time) (Price, error) {
	p, err := m.priceAt(at)
	if err != nil {
		return Price{}, err
	}
	return p.export(), nil
}

func (m *Model) priceAt(at time.Time) (*price, error) {
	if at.IsZero() {
		return nil, ErrNoTime
	}
	p := m.active(at)
	if !p.perToken {
		return nil, m.notPerToken()
	}
	return p, nil
}

func (m *Model) notPerToken() error { return fmt.Errorf("%w: %s", ErrNotPerToken, m) }

// active returns the last conditional price active at at, else the first one, as
// genai-prices does. For a model of several prices it keeps the price it found with the
// span of time in which that price stays the active one (up to the next start date or
// edge of a time-of-day window), so that calls within the span only compare two
// integers; a call outside it searches again and keeps the new span.
func (m *Model) active(at time.Time) *price {
	ps := m.prices
	if len(ps) == 1 {
		return &ps[0].price
	}
	n, inRange := unixNano(at)
	if s := m.span.Load(); s != nil && inRange && n >= s.from && n < s.until {
		return s.p
	}
	p := m.search(at)
	if inRange {
		from, until := m.spanAround(at, n)
		m.span.Store(&activeSpan{p: p, from: from, until: until})
	}
	return p
}

// search returns the last conditional price active at at, else the first one.
func (m *Model) search(at time.Time) *price {
	ps := m.prices
	for i := len(ps) - 1; i >= 0; i-- {
		if ps[i].activeAt(at) {
			return &ps[i].price
		}
	}
	return &ps[0].price
}

// spanAround returns a span of time [from, until) around at (Unix nanoseconds n) in which
// no price of m starts or stops: bounded by the nearest start dates and, for a model with
// time-of-day prices, by at's UTC day and the edges of the windows within it.
func (m *Model) spanAround(at time.Time, n int64) (from, until int64) {
	from, until = math.MinInt64, math.MaxInt64
	edge := func(e int64) {
		if e <= n {
			from = max(from, e)
		} else {
			until = min(until, e)
		}
	}
	daily := false
	for i := range m.prices {
		c := &m.prices[i]
		switch c.kind {
		case fromDate:
			if c.from > math.MaxInt64/int64(time.Second) || c.from < math.MinInt64/int64(time.Second) {
				continue // outside the span unixNano accepts: never an edge within it
			}
			edge(c.from * int64(time.Second))
		case timeOfDay:
			daily = true
		}
	}
	if daily {
		day := n - nanosOfDay(at) // midnight UTC before at; n is well inside int64
		edge(day)
		edge(day + nanosPerDay)
		for i := range m.prices {
			if c := &m.prices[i]; c.kind == timeOfDay {
				edge(day + c.start)
				edge(day + c.end)
			}
		}
	}
	return from, until
}

// unixNano returns at in Unix nanoseconds; ok is false for a time outside the years
// 1700–2200, where spans are not kept (such calls search every time).
func unixNano(at time.Time) (int64, bool) {
	const lo, hi = -8_520_336_000, 7_258_118_400 // 1700-01-01 and 2200-01-01 UTC, in seconds
	if s := at.Unix(); s < lo || s >= hi {
		return 0, false
	}
	return at.UnixNano(), true
}
