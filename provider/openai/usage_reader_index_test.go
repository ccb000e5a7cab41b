package openai

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestLastIndexFindsTheLastKey checks the backward search for the usage key against
// bytes.LastIndex on bodies built of the key's own bytes, quotes and colons, where
// candidates overlap and end at every distance from the end.
func TestLastIndexFindsTheLastKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pieces := []string{`"`, `usage`, `"usage"`, `e"`, `"u`, `:`, `x`, `"usag`}
	found := 0
	for range 20000 {
		var b []byte
		for range rng.IntN(12) {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		got, want := lastIndex(b, usageKey), bytes.LastIndex(b, usageKey)
		if got != want {
			t.Fatalf("lastIndex(%q) = %d, want %d", b, got, want)
		}
		if want >= 0 {
			found++
		}
	}
	if found == 0 {
		t.Fatal("no body held the key")
	}
}

// TestFirstIndexFindsTheFirstKey checks the forward search for the model key against
// bytes.Index, on bodies where the key's tail appears without its opening quote.
func TestFirstIndexFindsTheFirstKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pieces := []string{`"`, `model`, `"model"`, `model"`, `"m`, `:`, `x`, `"mode`}
	found := 0
	for range 20000 {
		var b []byte
		for range rng.IntN(12) {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		got, want := firstIndex(b, modelKey), bytes.Index(b, modelKey)
		if got != want {
			t.Fatalf("firstIndex(%q) = %d, want %d", b, got, want)
		}
		if want >= 0 {
			found++
		}
	}
	if found == 0 {
		t.Fatal("no body held the key")
	}
}
