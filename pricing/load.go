package pricing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"time"
)

// MaxFileSize bounds what Load reads: 64 MiB, about 130 times the full genai-prices file.
const MaxFileSize = 64 << 20

// LoadFile reads a price file of the genai-prices shape (see Load) from path.
func LoadFile(path string) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pricing: %w", err)
	}
	defer f.Close()
	t, err := Load(f)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return t, nil
}

// Load parses a price file of the shape of the @pydantic/genai-prices providers data: a
// JSON list of providers, each with id, name, api_pattern, optional model_match,
// provider_match and fallback_model_providers, and models, each with id, optional name and
// context_window, a match tree and prices (one price object, or a list of {constraint,
// prices} with start_date or time_of_date constraints). Fields this package does not use
// (descriptions, extractors, pricing URLs) are ignored; so are price keys it does not price
// (audio, image and video tokens, web searches), except that a price holding nothing but
// such keys makes Cost report ErrNotPerToken. Rates finer than one picodollar per token are
// rounded to the nearest picodollar (half away from zero).
//
// Load reads at most MaxFileSize bytes. Errors name the provider, model and field at fault;
// nothing is loaded from a file with any error.
func Load(r io.Reader) (*Table, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("pricing: reading price data: %w", err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("pricing: price data larger than %d bytes", MaxFileSize)
	}
	// One pass of encoding/json into generic values (numbers keep their decimal text), then
	// a walk over them: decoding nested raw messages again and again is several times slower.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("pricing: price data: want a JSON list of providers: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("pricing: price data: want a JSON list of providers: data after the JSON value")
	}
	list, ok := doc.([]any)
	if !ok {
		return nil, fmt.Errorf("pricing: price data: want a JSON list of providers, got %s", snippet(doc))
	}
	t := &Table{}
	byID := map[string]*provider{}
	fallbacks := make([][]string, len(list))
	for i, v := range list {
		p, fb, err := parseProvider(v)
		if err != nil {
			if p != nil && p.id != "" {
				return nil, fmt.Errorf("pricing: provider %q: %w", p.id, err)
			}
			return nil, fmt.Errorf("pricing: provider #%d: %w", i, err)
		}
		if byID[p.id] != nil {
			return nil, fmt.Errorf("pricing: provider %q appears twice", p.id)
		}
		byID[p.id] = p
		fallbacks[i] = fb
		t.providers = append(t.providers, p)
	}
	for i, p := range t.providers {
		for _, id := range fallbacks[i] {
			if fb := byID[id]; fb != nil { // the data's engine skips unknown ids too
				p.fallback = append(p.fallback, fb)
			}
		}
	}
	return t, nil
}

// object returns v as a JSON object, or an error naming what it is instead.
func object(v any) (map[string]any, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want an object, got %s", snippet(v))
	}
	return obj, nil
}

// optionalString returns the string at key; absent and null are "".
func optionalString(obj map[string]any, key string) (string, error) {
	switch v := obj[key].(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	default:
		return "", fmt.Errorf("%s: want a string, got %s", key, snippet(v))
	}
}

// parseProvider returns the provider (with its ID, when known, also on error) and its
// fallback provider IDs.
func parseProvider(v any) (*provider, []string, error) {
	obj, err := object(v)
	if err != nil {
		return nil, nil, err
	}
	p := &provider{}
	if p.id, err = optionalString(obj, "id"); err != nil {
		return p, nil, err
	}
	if p.id == "" {
		return p, nil, errors.New("id is missing")
	}
	if p.name, err = optionalString(obj, "name"); err != nil {
		return p, nil, err
	}
	pattern, err := optionalString(obj, "api_pattern")
	if err != nil {
		return p, nil, err
	}
	if pattern != "" { // without one, the provider matches no URL (rather than every URL)
		if p.apiPattern, err = regexp.Compile("^(?:" + pattern + ")"); err != nil {
			return p, nil, fmt.Errorf("api_pattern: %w", err)
		}
	}
	if p.modelMatch, err = optionalMatch(obj["model_match"]); err != nil {
		return p, nil, fmt.Errorf("model_match: %w", err)
	}
	if p.providerMatch, err = optionalMatch(obj["provider_match"]); err != nil {
		return p, nil, fmt.Errorf("provider_match: %w", err)
	}
	var fallback []string
	if fb, ok := obj["fallback_model_providers"]; ok && fb != nil {
		list, ok := fb.([]any)
		for _, id := range list {
			s, isString := id.(string)
			ok = ok && isString
			fallback = append(fallback, s)
		}
		if !ok {
			return p, nil, fmt.Errorf("fallback_model_providers: want a list of provider ids, got %s", snippet(fb))
		}
	}
	models, ok := obj["models"].([]any)
	if !ok {
		if obj["models"] == nil {
			return p, nil, errors.New("models is missing")
		}
		return p, nil, fmt.Errorf("models: want a list, got %s", snippet(obj["models"]))
	}
	seen := map[string]bool{}
	for i, mv := range models {
		m, match, err := parseModel(p.id, mv)
		if err != nil {
			if m != nil && m.id != "" {
				return p, nil, fmt.Errorf("model %q: %w", m.id, err)
			}
			return p, nil, fmt.Errorf("model #%d: %w", i, err)
		}
		if seen[m.id] {
			return p, nil, fmt.Errorf("model %q appears twice", m.id)
		}
		seen[m.id] = true
		p.models = append(p.models, entry{match: match, model: m})
	}
	return p, fallback, nil
}

func optionalMatch(v any) (*matcher, error) {
	if v == nil {
		return nil, nil
	}
	m, err := parseMatch(v, 0)
	if err != nil {
		return nil, err
	}
	return &m, nil
}

func parseModel(providerID string, v any) (*Model, matcher, error) {
	obj, err := object(v)
	if err != nil {
		return nil, matcher{}, err
	}
	m := &Model{provider: providerID}
	if m.id, err = optionalString(obj, "id"); err != nil {
		return m, matcher{}, err
	}
	if m.id == "" {
		return m, matcher{}, errors.New("id is missing")
	}
	if m.name, err = optionalString(obj, "name"); err != nil {
		return m, matcher{}, err
	}
	if obj["match"] == nil {
		return m, matcher{}, errors.New("match is missing")
	}
	match, err := parseMatch(obj["match"], 0)
	if err != nil {
		return m, matcher{}, fmt.Errorf("match: %w", err)
	}
	if cw := obj["context_window"]; cw != nil {
		n, ok := cw.(json.Number)
		v, exact, err := parseDecimal(string(n), 0, maxTokens)
		if !ok || err != nil || !exact {
			return m, matcher{}, fmt.Errorf("context_window: want a whole number of tokens in [0, %d], got %s", int64(maxTokens), snippet(cw))
		}
		m.contextWindow = int(v)
	}
	if obj["prices"] == nil {
		return m, matcher{}, errors.New("prices is missing")
	}
	if m.prices, err = parsePrices(obj["prices"]); err != nil {
		return m, matcher{}, fmt.Errorf("prices%w", err)
	}
	return m, match, nil
}

// maxTokens bounds token counts in a file (context windows, tier thresholds): 2^31-1, so
// they fit an int on every platform.
const maxTokens = 1<<31 - 1

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

// parseConstraint reads {"type": "start_date", "start_date": "2025-06-10"} or
// {"type": "time_of_date", "start_time": "00:30:00Z", "end_time": "16:30:00Z"}; "type" may
// be left out, as the data's engine allows. No constraint means always.
func parseConstraint(v any) (conditional, error) {
	if v == nil {
		return conditional{kind: always}, nil
	}
	obj, err := object(v)
	if err != nil {
		return conditional{}, err
	}
	keys := len(obj)
	typ, hasType := obj["type"]
	if hasType {
		keys--
		if _, ok := typ.(string); !ok {
			return conditional{}, errors.New("type: want a string")
		}
	}
	_, hasDate := obj["start_date"]
	_, hasStart := obj["start_time"]
	_, hasEnd := obj["end_time"]
	switch {
	case (typ == "start_date" || !hasType) && keys == 1 && hasDate:
		s, ok := obj["start_date"].(string)
		d, err := time.Parse(time.DateOnly, s)
		if !ok || err != nil || d.Year() < 1 {
			return conditional{}, fmt.Errorf("start_date: want a date YYYY-MM-DD, got %s", snippet(obj["start_date"]))
		}
		return conditional{kind: fromDate, from: d.Unix()}, nil
	case (typ == "time_of_date" || !hasType) && keys == 2 && hasStart && hasEnd:
		c := conditional{kind: timeOfDay}
		for _, f := range []struct {
			key string
			dst *int64
		}{{"start_time", &c.start}, {"end_time", &c.end}} {
			s, _ := obj[f.key].(string)
			ns, err := parseTimeOfDay(s)
			if err != nil {
				return conditional{}, fmt.Errorf("%s: %w", f.key, err)
			}
			*f.dst = ns
		}
		return c, nil
	}
	return conditional{}, fmt.Errorf("want a start_date or a time_of_date constraint, got %s", snippet(v))
}

// parseTimeOfDay reads HH:MM:SS[.fraction] followed by Z or an offset ±HH:MM, and returns
// the time in UTC as nanoseconds after midnight.
func parseTimeOfDay(s string) (int64, error) {
	bad := fmt.Errorf("want HH:MM:SS with Z or a ±HH:MM offset, got %q", s)
	two := func(i int) (int64, bool) {
		if i+2 > len(s) || !isDigit(s[i]) || !isDigit(s[i+1]) {
			return 0, false
		}
		return int64(s[i]-'0')*10 + int64(s[i+1]-'0'), true
	}
	h, ok1 := two(0)
	m, ok2 := two(3)
	sec, ok3 := two(6)
	if !ok1 || !ok2 || !ok3 || s[2] != ':' || s[5] != ':' || h > 23 || m > 59 || sec > 59 {
		return 0, bad
	}
	ns := (h*3600 + m*60 + sec) * int64(time.Second)
	i := 8
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		scale := int64(time.Second)
		for i < len(s) && isDigit(s[i]) {
			if scale /= 10; scale > 0 {
				ns += int64(s[i]-'0') * scale
			}
			i++
		}
		if i == start {
			return 0, bad
		}
	}
	switch rest := s[i:]; {
	case rest == "Z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, ok1 := two(i + 1)
		om, ok2 := two(i + 4)
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return 0, bad
		}
		off := (oh*3600 + om*60) * int64(time.Second)
		if rest[0] == '+' {
			off = -off
		}
		ns = ((ns+off)%nanosPerDay + nanosPerDay) % nanosPerDay
	default:
		return 0, bad
	}
	return ns, nil
}

// rateKeys are the per-token price keys this package prices.
var rateKeys = []string{"input_mtok", "cache_read_mtok", "cache_write_mtok", "output_mtok", "output_reasoning_mtok"}

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
