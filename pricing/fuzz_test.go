package pricing_test

import (
	"encoding/json"
	"math/big"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/llmclient/llmclient/pricing"
)

// FuzzLoad feeds arbitrary bytes to the loader: it returns a table or an error, never
// panics, and a table it returns answers lookups and prices calls.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(userFile))
	f.Add([]byte(`[]`))
	f.Add([]byte(`[{"id":"p","api_pattern":"x","models":[{"id":"m","match":{"regex":"^(?!a)(?!b)m"},"prices":[{"prices":{}},{"constraint":{"start_time":"23:00:00-01:30","end_time":"00:00:00Z"},"prices":{"input_mtok":{"base":1,"tiers":[{"start":1,"price":2e0}]}}}]}]}]`))
	f.Add([]byte(`[{"id":"p","api_pattern":"x","models":[{"id":"m","match":{"and":[]},"context_window":0,"prices":{"requests_kcount":0.001}}]}]`))
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		tb, err := pricing.Load(strings.NewReader(string(data)))
		if err != nil {
			if tb != nil {
				t.Fatal("a table and an error")
			}
			return
		}
		for _, name := range []string{"m", "acme-large", "gpt-4o", "", "M-20250102"} {
			for _, prov := range []string{"", "p", "acme", "litellm"} {
				if m, ok := tb.Lookup(prov, name); ok {
					_, _ = m.Cost(pricing.Tokens{Input: 300_000, CacheRead: 1, Output: 5, Reasoning: 1}, at)
					_, _ = m.PriceAt(at)
				}
			}
		}
		_, _ = tb.ProviderForURL("https://api.acme.example")
	})
}

// FuzzMatch evaluates arbitrary match clauses against arbitrary names and checks the string
// clauses against the strings package: case-insensitive, on the trimmed name.
func FuzzMatch(f *testing.F) {
	for _, c := range [][2]string{
		{`{"equals":"GPT-4o"}`, " gpt-4O "},
		{`{"starts_with":"claude-"}`, "Claude-3"},
		{`{"ends_with":"-tts"}`, "x-TTS"},
		{`{"contains":"ß"}`, "STRASSE"},
		{`{"regex":"^(?!.*-[tT][tT][sS](?:$|-))gemini"}`, "gemini-2.5-pro-tts"},
		{`{"or":[{"equals":"a"},{"and":[{"starts_with":"b"},{"regex":"c$"}]}]}`, "bxc"},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, clause, name string) {
		file := `[{"id":"p","api_pattern":"x","models":[{"id":"m","match":` + clause + `,"prices":{}}]}]`
		tb, err := pricing.Load(strings.NewReader(file))
		if err != nil {
			return
		}
		_, got := tb.Lookup("p", name)
		var c map[string]json.RawMessage
		if json.Unmarshal([]byte(clause), &c) != nil || len(c) != 1 {
			return
		}
		norm := strings.ToLower(strings.TrimSpace(name))
		if strings.Contains(norm, "-20") || len(name) > pricing.MaxNameLen {
			return // a dashless date is retried dashed; long names are refused
		}
		for op, raw := range c {
			var pattern string
			if json.Unmarshal(raw, &pattern) != nil {
				return
			}
			v := strings.ToLower(pattern)
			var want bool
			switch op {
			case "equals":
				want = norm == v
			case "starts_with":
				want = strings.HasPrefix(norm, v)
			case "ends_with":
				want = strings.HasSuffix(norm, v)
			case "contains":
				want = strings.Contains(norm, v)
			case "regex":
				// Regular expressions run case-sensitively on the lower-cased name.
				if strings.Contains(pattern, "(?") {
					return
				}
				re, err := regexp.Compile(pattern)
				if err != nil {
					return
				}
				want = re.MatchString(norm)
			default:
				return
			}
			if got != want {
				t.Fatalf("%s on %q: got %v, want %v", clause, name, got, want)
			}
		}
	})
}

var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// FuzzPriceDecimal checks the exact decimal parsing of rates against math/big: a rate of n
// dollars per million tokens is n × 10^6 picodollars per token, rounded half away from zero.
func FuzzPriceDecimal(f *testing.F) {
	for _, s := range []string{"0.15", "0.003625", "0.08333333333333334", "1e-7", "5e-7", "4.9999999e-7", "2.5E+1", "0", "-0", "1000000", "1e6", "0.0000005", "123456.789012345"} {
		f.Add(s)
	}
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, num string) {
		file := `[{"id":"p","api_pattern":"x","models":[{"id":"m","match":{"equals":"m"},"prices":{"input_mtok":` + num + `}}]}]`
		tb, err := pricing.Load(strings.NewReader(file))
		if !jsonNumber.MatchString(num) {
			return // other text makes invalid JSON or another document
		}
		want, ok := new(big.Rat).SetString(num)
		if !ok {
			t.Fatalf("big.Rat rejects %q", num)
		}
		inRange := want.Sign() >= 0 && want.Cmp(big.NewRat(1_000_000, 1)) <= 0
		if !inRange {
			if err == nil {
				t.Fatalf("%s: loaded a rate outside [0, 1e6]", num)
			}
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", num, err)
		}
		m, _ := tb.Lookup("p", "m")
		p, err := m.PriceAt(at)
		if err != nil {
			t.Fatal(err)
		}
		// picodollars per token = dollars per MTok × 10^6, rounded half up (non-negative).
		perToken := new(big.Rat).Mul(want, big.NewRat(1_000_000, 1))
		q, rem := new(big.Int).QuoRem(perToken.Num(), perToken.Denom(), new(big.Int))
		if rem.Lsh(rem, 1).Cmp(perToken.Denom()) >= 0 {
			q.Add(q, big.NewInt(1))
		}
		if got := int64(p.Input.At(0)); got != q.Int64()*1_000_000 {
			t.Fatalf("%s: got %d picodollars per MTok, want %d", num, got, q.Int64()*1_000_000)
		}
	})
}
