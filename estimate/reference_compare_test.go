package estimate

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// referenceEncodings are the heuristics that reference_test.go's refCount checks.
var referenceEncodings = []struct {
	name string
	p    *heuristicParams
}{{"o200k_base", &paramsO200k}, {"cl100k_base", &paramsCL100k}}

// checkReference fails t when count and the reference implementation disagree on s for an
// encoding.
func checkReference(t testing.TB, s string) {
	t.Helper()
	for _, e := range referenceEncodings {
		if got, want := e.p.count(s), e.p.refCount(s); got != want {
			t.Fatalf("%s: count(%q) = %d, reference %d", e.name, s, got, want)
		}
	}
}

// referenceChunkSizes are the lengths the corpora are cut into: every length up to a little
// over one block, so that the short-text paths meet every length and the cuts fall on every
// byte of a multi-byte character, then around the block boundaries and beyond.
var referenceChunkSizes = func() []int {
	var n []int
	for i := 1; i <= 72; i++ {
		n = append(n, i)
	}
	return append(n, 100, 127, 128, 129, 191, 192, 193, 255, 256, 257, 1000, 4096)
}()

func TestHeuristicMatchesReferenceCorpus(t *testing.T) {
	for name, text := range readAllCorpora(t) {
		t.Run(name, func(t *testing.T) {
			checkReference(t, text)
			for _, n := range referenceChunkSizes {
				// Up to 300 chunks of each size, from an offset that moves with n so that the
				// cuts do not always fall on the same bytes.
				for i, k := n%7, 0; i < len(text) && k < 300; i, k = i+n, k+1 {
					checkReference(t, text[i:min(i+n, len(text))])
				}
			}
		})
	}
}

func TestHeuristicMatchesReferenceRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	gens := map[string]func(n int) string{
		"ascii": func(n int) string { // printable ASCII, whitespace and controls
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(r.UintN(128))
			}
			return string(b)
		},
		"ascii-words": func(n int) string { // letters, digits and a few separators, as in code and prose
			const alphabet = "aaaaeeeiioouttnnsrhldcmZQAXb0123456789     \n\t.,;:(){}[]\"'_-+=/*&|<>!?#@$%^~`\\"
			b := make([]byte, n)
			for i := range b {
				b[i] = alphabet[r.IntN(len(alphabet))]
			}
			return string(b)
		},
		"utf8": func(n int) string { // valid runes of every plane
			var b strings.Builder
			for b.Len() < n {
				c := rune(r.Int32N(0x110000))
				if r.IntN(2) == 0 {
					c = rune(r.Int32N(0x800))
				}
				if utf8.ValidRune(c) {
					b.WriteRune(c)
				}
			}
			return b.String()
		},
		"cjk": func(n int) string { // kana, ideographs, Hangul, CJK punctuation, and a little ASCII
			ranges := [][2]rune{{0x3040, 0x30FF}, {0x4E00, 0x9FFF}, {0x4E00, 0x4FFF}, {0xAC00, 0xD7A3}, {0x3000, 0x303F}, {0xFF00, 0xFF5F}, {'a', 'z'}, {' ', '@'}}
			var b strings.Builder
			for b.Len() < n {
				g := ranges[r.IntN(len(ranges))]
				b.WriteRune(g[0] + rune(r.Int32N(g[1]-g[0]+1)))
			}
			return b.String()
		},
		"invalid": func(n int) string { // raw bytes, biased to bytes above ASCII
			b := make([]byte, n)
			for i := range b {
				if r.IntN(3) == 0 {
					b[i] = byte(r.UintN(128))
				} else {
					b[i] = byte(0x80 + r.UintN(128))
				}
			}
			return string(b)
		},
		"fragments": func(n int) string { return randomText(r, n/2+1) },
	}
	for name, gen := range gens {
		t.Run(name, func(t *testing.T) {
			for range 5000 {
				checkReference(t, gen(r.IntN(150)))
			}
			for range 50 {
				checkReference(t, gen(r.IntN(5000)))
			}
		})
	}
}

// TestHeuristicMatchesReferenceShort tries every text of one and two bytes, and every text
// of three bytes over an alphabet with one byte of each class and the edges of the ranges.
func TestHeuristicMatchesReferenceShort(t *testing.T) {
	var b [3]byte
	for x := range 256 {
		b[0] = byte(x)
		checkReference(t, string(b[:1]))
		for y := range 256 {
			b[1] = byte(y)
			checkReference(t, string(b[:2]))
		}
	}
	const alphabet = "\x00\t\n\v\f\r\x1f !/09:@AZ[`az{\x7f\x80\xbf\xc2\xe4\xf0\xff"
	for _, x := range []byte(alphabet) {
		for _, y := range []byte(alphabet) {
			for _, z := range []byte(alphabet) {
				b = [3]byte{x, y, z}
				checkReference(t, string(b[:]))
			}
		}
	}
}

// TestHeuristicCountTokensMatchesReference checks the public entry point, which picks the
// encoding from the model name.
func TestHeuristicCountTokensMatchesReference(t *testing.T) {
	texts := []string{"", "Say hello.", "中文的文本", "func main() {\n\tfmt.Println(\"hi\")\n}\n", strings.Repeat("word ", 40)}
	for _, m := range []struct {
		model string
		p     *heuristicParams
	}{{"gpt-4o", &paramsO200k}, {"gpt-4", &paramsCL100k}, {"m", &paramsO200k}, {"openai/gpt-3.5-turbo", &paramsCL100k}} {
		for _, s := range texts {
			if got, want := (Heuristic{}).CountTokens(m.model, s), m.p.refCount(s); got != want {
				t.Errorf("CountTokens(%q, %q) = %d, reference %d", m.model, s, got, want)
			}
		}
	}
}

// FuzzHeuristicMatchesReference checks count against the reference implementation.
func FuzzHeuristicMatchesReference(f *testing.F) {
	for _, text := range readAllCorpora(f) {
		f.Add(text[:min(len(text), 300)])
		f.Add(text[:min(len(text), 40)])
	}
	for _, s := range featureFragments {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkReference(t, s)
	})
}
