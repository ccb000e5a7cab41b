package adapter_test

import (
	"errors"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/internal/adapter"
)

func TestSkips(t *testing.T) {
	var k adapter.Skips
	if k.Skip() {
		t.Fatal("skipped before a good event")
	}
	k.Good()
	for i := range adapter.MaxSkippedEvents {
		if !k.Skip() {
			t.Fatalf("skip %d refused", i+1)
		}
	}
	if k.Skip() || k.Count() != adapter.MaxSkippedEvents {
		t.Fatalf("past the bound: count %d", k.Count())
	}
	e := &llmclient.Error{Message: "x: malformed"}
	if err := k.Note(e); !errors.Is(err, e) || e.Message != "x: malformed (after 8 malformed events skipped)" {
		t.Fatalf("note: %q", e.Message)
	}
	var none adapter.Skips
	e2 := &llmclient.Error{Message: "m"}
	if none.Note(e2); e2.Message != "m" {
		t.Fatalf("note without skips: %q", e2.Message)
	}
	for in, want := range map[string]bool{`{"a":`: true, " \n{": true, "[{}]": false, "<html>": false, "": false} {
		if adapter.StartsObject([]byte(in)) != want {
			t.Errorf("StartsObject(%q) != %v", in, want)
		}
	}
}
