package openai

import (
	"fmt"
	"log/slog"
)

// String describes the provider by its base URL; it never prints the API key.
func (p *Provider) String() string {
	if p == nil {
		return "openai.Provider(nil)"
	}
	return "openai.Provider{BaseURL: " + p.BaseURL() + "}"
}

// GoString is String, for %#v.
func (p *Provider) GoString() string { return p.String() }

// Format prints String for every verb, so that no verb prints the key.
func (p *Provider) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(p.String())) }

// LogValue is the provider's slog form: its base URL.
func (p *Provider) LogValue() slog.Value {
	if p == nil {
		return slog.StringValue("nil")
	}
	return slog.GroupValue(slog.String("base_url", p.BaseURL()))
}
