package estimate

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// classifyTail is classify of the text padded with zero bytes to a whole block: every
// length, on random bytes of every class and on ASCII text.
func TestClassifyTailIsPaddedClassify(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 5))
	const alphabet = "aZ0 \t\n\r\v\f.,!-_\"{}é中\x00\x7f\xff"
	for trial := range 2000 {
		n := 1 + trial%63
		var sb strings.Builder
		for sb.Len() < n {
			if trial%3 == 0 {
				sb.WriteByte(byte(rng.IntN(256)))
			} else {
				sb.WriteByte(alphabet[rng.IntN(len(alphabet))])
			}
		}
		s := sb.String()[:n]
		padded := s + strings.Repeat("\x00", 64-n)
		var got, want block
		classifyTail(&got, "xyz"+s, 3)
		classify(&want, padded, 0)
		if got != want {
			t.Fatalf("%q (%d bytes): classifyTail %+v, classify of the padded block %+v", s, n, got, want)
		}
	}
}
