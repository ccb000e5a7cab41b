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
	searchAgainst(t, 3, []string{`"`, `usage`, `"usage"`, `e"`, `"u`, `:`, `x`, `"usag`},
		func(b []byte) (int, int) { return lastIndex(b, usageKey), bytes.LastIndex(b, usageKey) })
}

// TestFirstIndexFindsTheFirstKey checks the forward search for the model key against
// bytes.Index, on bodies where the key's tail appears without its opening quote.
func TestFirstIndexFindsTheFirstKey(t *testing.T) {
	searchAgainst(t, 5, []string{`"`, `model`, `"model"`, `model"`, `"m`, `:`, `x`, `"mode`},
		func(b []byte) (int, int) { return firstIndex(b, modelKey), bytes.Index(b, modelKey) })
}

// searchAgainst builds 20,000 random bodies of up to 11 pieces and fails t where search's
// answer (got) differs from the bytes package's (want), or when no body held the key.
func searchAgainst(t *testing.T, seed uint64, pieces []string, search func([]byte) (got, want int)) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed+1))
	found := 0
	for range 20000 {
		var b []byte
		for range rng.IntN(12) {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		got, want := search(b)
		if got != want {
			t.Fatalf("search(%q) = %d, want %d", b, got, want)
		}
		if want >= 0 {
			found++
		}
	}
	if found == 0 {
		t.Fatal("no body held the key")
	}
}

// TestKnownKeyAgreesWithKeyOf reads each name the plain usage reader knows, and each with
// one byte changed, followed by its closing quote: knownKey must give what keyOf gives
// for the name, and the index of the quote whenever it names a key.
func TestKnownKeyAgreesWithKeyOf(t *testing.T) {
	names := []string{"total_tokens", "prompt_tokens", "cached_tokens", "cache_write_tokens", "reasoning_tokens", "completion_tokens",
		"prompt_tokens_details", "prompt_cache_hit_tokens", "completion_tokens_details", "total_tokens_", "prompt_tokens_detail"}
	for _, name := range names {
		for pos := -1; pos < len(name); pos++ {
			for _, flip := range []byte{0x01, 0x20, 0x80} {
				b := []byte(name)
				if pos >= 0 {
					b[pos] ^= flip
				}
				v := append(b, `":1,"x":2}`...)
				id, k := knownKey(v, 0)
				want := keyOf(v[:len(b)])
				if id != want {
					t.Fatalf("knownKey(%q) = %d, keyOf %d", v, id, want)
				}
				if id != keyOther && k != len(b) {
					t.Fatalf("knownKey(%q) ends at %d, want %d", v, k, len(b))
				}
			}
		}
	}
}
