package jsonscan_test

import (
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/llmclient/llmclient/internal/jsonscan"
)

// Count reads every value the usage readers may meet, and never fails on one that is
// valid JSON: integers as they are, fractions and exponents truncated toward zero, null
// as 0, and -1 for the rest.
func TestCount(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{`0`, 0}, {`5`, 5}, {`-5`, -5}, {`-0`, 0}, {`123456789012345678`, 123456789012345678},
		{`9223372036854775807`, math.MaxInt64}, {`-9223372036854775808`, math.MinInt64},
		{`9223372036854775808`, -1}, {`92233720368547758070`, -1},
		{`5.7`, 5}, {`5.0`, 5}, {`0.9`, 0}, {`-0.0`, 0}, {`-0.5`, -1}, {`-5.7`, -1},
		{`1e3`, 1000}, {`2.5e3`, 2500}, {`1E18`, 1e18}, {`1e-400`, 0}, {`-1e18`, -1},
		{`1e19`, -1}, {`1e400`, -1}, {`-1e400`, -1},
		{`null`, 0}, {`"5"`, -1}, {`true`, -1}, {`{"a":1}`, -1}, {`[1]`, -1},
	} {
		var s jsonscan.Scanner
		s.Reset([]byte(`{"n":` + tc.in + `,"next":7}`))
		s.Object()
		s.Key()
		got := s.Count()
		s.More()
		if k := string(s.Key()); got != tc.want || k != "next" || s.Int() != 7 || s.Err() != nil {
			t.Errorf("Count(%s) = %d, then key %q, err %v; want %d", tc.in, got, k, s.Err(), tc.want)
		}
		if got := jsonscan.CountOf([]byte(tc.in)); got != tc.want {
			t.Errorf("CountOf(%s) = %d, want %d", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{`5.`, `-`, `1e`, `{"a":`, `5 6`} {
		if got := jsonscan.CountOf([]byte(bad)); got != -1 {
			t.Errorf("CountOf(%s) = %d, want -1", bad, got)
		}
	}
}

// FuzzCount checks Count against encoding/json's reading of the same value: for a number,
// its exact value truncated toward zero when it is not negative and fits an int64 (an
// integer that fits, negative too, as it is; a fraction up to float64 rounding); 0 for
// null; -1 for anything else.
func FuzzCount(f *testing.F) {
	for _, s := range []string{`5`, `5.7`, `-5`, `-0.5`, `1e18`, `-1e18`, `9223372036854775807`, `1e400`, `null`, `"7"`, `{}`, `0.99999999999999999999`, `9223372036854775807.5`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			return
		}
		var v any
		dec := json.NewDecoder(strings.NewReader(in))
		dec.UseNumber()
		if dec.Decode(&v) != nil {
			return
		}
		want := -1
		switch x := v.(type) {
		case nil:
			want = 0
		case json.Number:
			if n, err := strconv.ParseInt(string(x), 10, 64); err == nil {
				want = int(n)
			} else if r, ok := new(big.Float).SetPrec(2000).SetString(string(x)); ok && r.Sign() >= 0 && !r.IsInf() {
				if i, _ := r.Int(nil); i.IsInt64() {
					want = int(i.Int64())
				}
			}
		}
		if got := jsonscan.CountOf([]byte(in)); got != want {
			// A number that is not an integer is read as a float64, which may round it to
			// the next integer (0.99999999999999999999 is 1) or, near 2^63, past int64.
			f, err := strconv.ParseFloat(strings.TrimSpace(in), 64)
			if _, isNum := v.(json.Number); !isNum || err != nil || !(got == int(f) || f >= 1<<62 && got == -1) {
				t.Fatalf("CountOf(%s) = %d, want %d", in, got, want)
			}
		}
	})
}
