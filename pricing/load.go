package pricing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
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
	m.prepare()
	return m, match, nil
}

// maxTokens bounds token counts in a file (context windows, tier thresholds): 2^31-1, so
// they fit an int on every platform.
const maxTokens = 1<<31 - 1
