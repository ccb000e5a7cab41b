package pricing

import (
	"regexp"
	"strings"
)

// Table is a price list: providers, their models and prices, loaded from a file of the
// genai-prices shape (Load, LoadFile) or the embedded snapshot (Default). A Table is
// immutable apart from its lookup cache and safe for concurrent use.
type Table struct {
	providers []*provider
	cache     lookupCache
}

// provider is one provider of a Table.
type provider struct {
	id, name      string
	apiPattern    *regexp.Regexp
	modelMatch    *matcher
	providerMatch *matcher
	fallback      []*provider
	models        []entry
}

type entry struct {
	match matcher
	model *Model
}

// MaxNameLen is the longest provider or model name Lookup evaluates: 256 bytes. Longer
// names are not found.
const MaxNameLen = 256

// Lookup returns the model that the table prices under the given provider and model name,
// matched as the genai-prices engine matches them:
//
//   - The model name is trimmed and lower-cased, then tested against each model's match
//     tree in file order (string clauses ignore case; regular expressions run on the
//     lower-cased name); the first match wins.
//   - provider is a provider ID ("openai", "anthropic", "google", "deepseek", …) or a name
//     its provider_match accepts ("gemini", "vertex", "bedrock", "xai"), ignoring case. An
//     unknown provider finds nothing.
//   - An empty provider picks the first provider (in file order) whose model_match accepts
//     the name ("gpt-…" is OpenAI, "claude…" Anthropic, "gemini…" Google); a name that no
//     provider claims, such as "llama-3.3-70b", needs a provider.
//   - A provider with fallback_model_providers (Google, Azure) searches those providers'
//     models next, one level deep; then a date written "-20250514" is retried as
//     "-2025-05-14".
//   - Provider "litellm" with a name "anthropic/claude-…" looks the rest up under the named
//     provider, else by model_match, as the data's engine does for LiteLLM.
//
// ok is false when nothing matches: the cost is unknown, never zero. Results, misses
// included, are cached per (provider, model) pair exactly as given, so repeated lookups
// cost a map read and do not allocate. Names longer than MaxNameLen are not found.
func (t *Table) Lookup(provider, model string) (m *Model, ok bool) {
	k := lookupKey{provider, model}
	if m, hit := t.cache.load(k); hit {
		return m, m != nil
	}
	if len(provider) > MaxNameLen || len(model) > MaxNameLen {
		return nil, false
	}
	m = t.find(provider, model)
	t.cache.store(k, m)
	return m, m != nil
}

// find is Lookup without the cache.
func (t *Table) find(providerName, model string) *Model {
	name := strings.ToLower(strings.TrimSpace(model))
	litellm := strings.EqualFold(providerName, "litellm")
	if litellm {
		if i := strings.IndexByte(name, '/'); i > 0 && i < len(name)-1 && t.providerByName(name[:i]) != nil {
			providerName, name, litellm = name[:i], name[i+1:], false
		}
	}
	var p *provider
	if providerName != "" {
		if p = t.providerByName(providerName); p == nil && !litellm {
			return nil
		}
	}
	if p == nil {
		for _, q := range t.providers {
			if q.modelMatch != nil && q.modelMatch.match(name) {
				p = q
				break
			}
		}
		if p == nil {
			return nil
		}
	}
	if m := p.findModel(name, true); m != nil {
		return m
	}
	if alt := dashedDates(name); alt != name {
		return p.findModel(alt, true)
	}
	return nil
}

// providerByName finds a provider by ID, else by its provider_match, after trimming and
// lower-casing the name.
func (t *Table) providerByName(name string) *provider {
	name = strings.ToLower(strings.TrimSpace(name))
	for _, p := range t.providers {
		if p.id == name {
			return p
		}
	}
	for _, p := range t.providers {
		if p.providerMatch != nil && p.providerMatch.match(name) {
			return p
		}
	}
	return nil
}

// findModel returns the first model whose match tree accepts name, then, when fallback is
// true, the first in the fallback providers (without their own fallbacks).
func (p *provider) findModel(name string, fallback bool) *Model {
	for i := range p.models {
		if p.models[i].match.match(name) {
			return p.models[i].model
		}
	}
	if fallback {
		for _, f := range p.fallback {
			if m := f.findModel(name, false); m != nil {
				return m
			}
		}
	}
	return nil
}

// ProviderForURL returns the ID of the first provider whose api_pattern matches the start of
// an API base URL ("https://api.deepseek.com/v1" is "deepseek"), for upstreams that speak
// one vendor's protocol at another vendor's address. ok is false when none does. It is
// not cached (a few microseconds): call it once per upstream, not per call.
func (t *Table) ProviderForURL(apiURL string) (id string, ok bool) {
	for _, p := range t.providers {
		if p.apiPattern != nil && p.apiPattern.MatchString(apiURL) {
			return p.id, true
		}
	}
	return "", false
}

// dashedDates rewrites every "-YYYYMMDD" of a valid 20xx date that is followed by "-", ":"
// or the end of the name as "-YYYY-MM-DD", as the data's engine does before its second try.
func dashedDates(name string) string {
	var b []byte
	last := 0
	for i := 0; i+9 <= len(name); {
		if !isDate(name, i) {
			i++
			continue
		}
		if b == nil {
			b = make([]byte, 0, len(name)+4)
		}
		b = append(b, name[last:i+5]...) // through the year
		b = append(b, '-')
		b = append(b, name[i+5:i+7]...)
		b = append(b, '-')
		b = append(b, name[i+7:i+9]...)
		i += 9
		last = i
	}
	if b == nil {
		return name
	}
	return string(append(b, name[last:]...))
}

// isDate reports whether name[i:] starts with "-20YYMMDD" of a real date, followed by "-",
// ":" or the end.
func isDate(name string, i int) bool {
	if name[i] != '-' || name[i+1] != '2' || name[i+2] != '0' {
		return false
	}
	var d [6]int
	for j := range d {
		c := name[i+3+j]
		if !isDigit(c) {
			return false
		}
		d[j] = int(c - '0')
	}
	if end := i + 9; end < len(name) && name[end] != '-' && name[end] != ':' {
		return false
	}
	year, month, day := 2000+d[0]*10+d[1], d[2]*10+d[3], d[4]*10+d[5]
	if month < 1 || month > 12 || day < 1 {
		return false
	}
	return day <= daysIn(year, month)
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
