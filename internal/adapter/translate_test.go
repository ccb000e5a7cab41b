package adapter_test

import (
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/adapter"
)

var anthropicPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

func TestPatternID(t *testing.T) {
	tests := []struct{ id, wire string }{
		{"toolu_01A09q90qw90lq917835lq9", "toolu_01A09q90qw90lq917835lq9"},
		{"call_1", "call_1"},
		{"functions.get_weather:0", "lcid_ZnVuY3Rpb25zLmdldF93ZWF0aGVyOjA"},
		{"call_0__thought__CiQB/w==", "lcid_Y2FsbF8wX190aG91Z2h0X19DaVFCL3c9PQ"},
		{"", "lcid_"},
		{"lcid_abc", "lcid_bGNpZF9hYmM"}, // an id that looks encoded is encoded too
	}
	for _, tt := range tests {
		got := adapter.PatternID(tt.id)
		if got != tt.wire || !anthropicPattern.MatchString(got) {
			t.Errorf("PatternID(%q) = %q, want %q", tt.id, got, tt.wire)
		}
		if back := adapter.UnpatternID(got); back != tt.id {
			t.Errorf("UnpatternID(%q) = %q, want %q", got, back, tt.id)
		}
	}
	if got := adapter.UnpatternID("lcid_!!"); got != "lcid_!!" {
		t.Errorf("a malformed encoded id must come back as it is, got %q", got)
	}
}

func FuzzPatternID(f *testing.F) {
	for _, s := range []string{"", "a", "call_0__thought__x/+=", "lcid_", "lcid_lcid_", "\x00\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		w := adapter.PatternID(id)
		if !anthropicPattern.MatchString(w) {
			t.Fatalf("PatternID(%q) = %q does not match the pattern", id, w)
		}
		if back := adapter.UnpatternID(w); back != id {
			t.Fatalf("round trip of %q gave %q", id, back)
		}
		if c := adapter.CapID(id, 40); len(c) > 40 || (len(id) <= 40 && !strings.HasPrefix(id, "lch_") && c != id) {
			t.Fatalf("CapID(%q, 40) = %q", id, c)
		}
	})
}

func TestCapID(t *testing.T) {
	long := "call_0__thought__" + strings.Repeat("Q", 60)
	a, b := adapter.CapID(long, 40), adapter.CapID(long, 40)
	if a != b || len(a) != 40 || !strings.HasPrefix(a, "lch_") {
		t.Errorf("CapID = %q, %q; want the same 40-byte lch_ id", a, b)
	}
	if c := adapter.CapID(long+"x", 40); c == a {
		t.Error("different ids map to the same short id")
	}
	if got := adapter.CapID("call_1", 40); got != "call_1" {
		t.Errorf("a short id changed: %q", got)
	}
	if got := adapter.CapID("lch_1", 40); got == "lch_1" {
		t.Error("an id that looks shortened must be shortened too, so the mapping stays one-to-one")
	}
}

func TestClamp(t *testing.T) {
	tests := []struct {
		v      *float64
		want   *float64
		note   string
		errMsg string
	}{
		{nil, nil, "", ""},
		{llmclient.Float(0.5), llmclient.Float(0.5), "", ""},
		{llmclient.Float(1), llmclient.Float(1), "", ""},
		{llmclient.Float(1.5), llmclient.Float(1), "vendor: temperature 1.5 lowered to the maximum 1", ""},
		{llmclient.Float(-0.1), llmclient.Float(0), "vendor: temperature -0.1 raised to the minimum 0", ""},
		{llmclient.Float(math.MaxFloat64), llmclient.Float(1), "vendor: temperature 1.7976931348623157e+308 lowered to the maximum 1", ""},
		{llmclient.Float(math.NaN()), nil, "", "temperature is not a finite number"},
		{llmclient.Float(math.Inf(-1)), nil, "", "temperature is not a finite number"},
	}
	for _, tt := range tests {
		n := adapter.NewNotes("vendor")
		got, err := adapter.Clamp(n, "temperature", tt.v, 0, 1)
		if tt.errMsg != "" {
			if err == nil || err.Error() != tt.errMsg {
				t.Errorf("Clamp(%v) error = %v, want %q", *tt.v, err, tt.errMsg)
			}
			continue
		}
		if err != nil || (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
			t.Errorf("Clamp = %v, %v; want %v", got, err, tt.want)
		}
		if notes := n.List(); tt.note == "" && len(notes) > 0 || tt.note != "" && (len(notes) != 1 || notes[0] != tt.note) {
			t.Errorf("notes = %q, want %q", notes, tt.note)
		}
	}
}

func TestLimitStopsAndNotes(t *testing.T) {
	n := adapter.NewNotes("openai")
	got := adapter.LimitStops(n, []string{"1", "2", "3", "4", "5"}, 4)
	if len(got) != 4 || got[3] != "4" {
		t.Errorf("LimitStops = %q", got)
	}
	n.Add("x %d", 1)
	n.Add("x %d", 1)
	if l := n.List(); len(l) != 2 || l[0] != `openai: kept the first 4 of 5 stop sequences (the vendor's maximum); dropped ["5"]` || l[1] != "openai: x 1" {
		t.Errorf("notes = %q", l)
	}
	var none *adapter.Notes
	none.Add("ignored")
	if none.List() != nil {
		t.Error("a nil Notes has notes")
	}
	if s := adapter.LimitStops(nil, []string{"a"}, 4); len(s) != 1 {
		t.Errorf("LimitStops = %q", s)
	}
}

func TestUnsupported(t *testing.T) {
	e := adapter.Unsupported("openai", "gpt-4o", "assistant messages take text only")
	if e.Class != failure.BadRequest || e.Model != "gpt-4o" || e.Message != "openai: assistant messages take text only" ||
		!errors.Is(e, llmclient.ErrUnsupported) {
		t.Errorf("Unsupported = %+v", e)
	}
}
