package llmclient

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
)

// The types below hold API keys. Their fmt and slog forms (every verb, %+v and %#v
// included) name what they are and never print a key: keys appear as labels such as
// "key#1".

// String describes the upstream without its keys.
func (u Upstream) String() string {
	var b strings.Builder
	b.WriteString("llmclient.Upstream{Name: ")
	b.WriteString(strconv.Quote(u.Name))
	if u.Provider != nil {
		fmt.Fprintf(&b, ", Provider: %T", u.Provider)
	}
	if len(u.Keys) > 0 {
		b.WriteString(", Keys: ")
		b.WriteString(strconv.Itoa(len(u.Keys)))
		b.WriteString(" redacted")
	}
	if len(u.KeySources) > 0 {
		b.WriteString(", KeySources: ")
		b.WriteString(strconv.Itoa(len(u.KeySources)))
	}
	if u.Models != nil {
		fmt.Fprintf(&b, ", Models: %v", u.Models)
	}
	if u.Limits != (Limits{}) {
		fmt.Fprintf(&b, ", Limits: %+v", u.Limits)
	}
	if u.Timeout != 0 {
		b.WriteString(", Timeout: ")
		b.WriteString(u.Timeout.String())
	}
	b.WriteByte('}')
	return b.String()
}

// GoString is String, for %#v.
func (u Upstream) GoString() string { return u.String() }

// Format prints String for every verb.
func (u Upstream) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(u.String())) }

// LogValue is the upstream's slog form: its name, provider type and key count.
func (u Upstream) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", u.Name), slog.String("provider", fmt.Sprintf("%T", u.Provider)),
		slog.Int("keys", len(u.Keys)+len(u.KeySources)))
}

// String describes the call without its key.
func (c Call) String() string {
	key := "none"
	if c.APIKey != "" {
		key = "redacted"
	}
	return "llmclient.Call{Model: " + strconv.Quote(c.Model) + ", APIKey: " + key + "}"
}

// GoString is String, for %#v.
func (c Call) GoString() string { return c.String() }

// Format prints String for every verb.
func (c Call) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(c.String())) }

// LogValue is the call's slog form: its model.
func (c Call) LogValue() slog.Value { return slog.GroupValue(slog.String("model", c.Model)) }

// String describes the Client by its upstreams.
func (c *Client) String() string {
	if c == nil {
		return "llmclient.Client(nil)"
	}
	names := make([]string, len(c.upstreams))
	for i, up := range c.upstreams {
		names[i] = strconv.Quote(up.Name)
	}
	return "llmclient.Client{upstreams: [" + strings.Join(names, " ") + "]}"
}

// GoString is String, for %#v.
func (c *Client) GoString() string { return c.String() }

// Format prints String for every verb.
func (c *Client) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(c.String())) }

// LogValue is the Client's slog form: its upstreams' names.
func (c *Client) LogValue() slog.Value {
	if c == nil {
		return slog.StringValue("nil")
	}
	names := make([]string, len(c.upstreams))
	for i, up := range c.upstreams {
		names[i] = up.Name
	}
	return slog.GroupValue(slog.Any("upstreams", names))
}
