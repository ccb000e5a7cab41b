// Command gen derives the pricing package's embedded snapshot, data/prices.json, from the
// providers data of @pydantic/genai-prices (MIT licence; see data/LICENSE):
//
//	GENAI_PRICES=/path/to/providers.json go generate ./pricing
//	go run ./pricing/internal/gen -in /path/to/providers.json -out pricing/data/prices.json
//
// It keeps the fields the pricing package reads, in the same shape and order, and copies
// every value verbatim (numbers keep their decimal text); descriptions, price comments,
// pricing URLs, usage extractors and deprecation flags are dropped. Each model goes on a
// line of its own so that price updates read as small diffs. The result is checked by
// loading it with pricing.Load before it is written.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/llmclient/llmclient/pricing"
)

func main() {
	in := flag.String("in", "", "genai-prices providers.json to read (required)")
	out := flag.String("out", "data/prices.json", "snapshot to write")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	if in == "" {
		return errors.New("-in is required (go generate reads it from $GENAI_PRICES)")
	}
	src, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	snap, err := compact(src)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if _, err := pricing.Load(bytes.NewReader(snap)); err != nil {
		return fmt.Errorf("the derived snapshot does not load: %w", err)
	}
	return os.WriteFile(out, snap, 0o644)
}

// provider and model list the kept fields, in the data's order.
type provider struct {
	ID            string          `json:"id"`
	Name          string          `json:"name,omitempty"`
	APIPattern    string          `json:"api_pattern"`
	ModelMatch    json.RawMessage `json:"model_match,omitempty"`
	ProviderMatch json.RawMessage `json:"provider_match,omitempty"`
	Fallback      []string        `json:"fallback_model_providers,omitempty"`
	Models        []model         `json:"models"`
}

type model struct {
	ID            string          `json:"id"`
	Name          string          `json:"name,omitempty"`
	Match         json.RawMessage `json:"match"`
	ContextWindow json.RawMessage `json:"context_window,omitempty"`
	Prices        json.RawMessage `json:"prices"`
}

// compact returns the snapshot of a genai-prices providers file.
func compact(src []byte) ([]byte, error) {
	var ps []provider
	if err := json.Unmarshal(src, &ps); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("[\n")
	for i, p := range ps {
		models := p.Models
		p.Models = nil
		p.ModelMatch, p.ProviderMatch = dropNull(p.ModelMatch), dropNull(p.ProviderMatch)
		head, err := marshal(p)
		if err != nil {
			return nil, err
		}
		// head ends in "models":null}; open the list there instead.
		head = bytes.TrimSuffix(head, []byte("null}"))
		b.Write(head)
		b.WriteString("[\n")
		for j, m := range models {
			m.ContextWindow = dropNull(m.ContextWindow)
			line, err := marshal(m)
			if err != nil {
				return nil, fmt.Errorf("provider %q model %q: %w", p.ID, m.ID, err)
			}
			b.Write(line)
			if j < len(models)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString("]}")
		if i < len(ps)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]\n")
	return b.Bytes(), nil
}

// marshal encodes v compactly, without escaping <, > and & (regular expressions stay
// readable).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func dropNull(raw json.RawMessage) json.RawMessage {
	if string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	return raw
}
