package estimate

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// featuresNaive counts the features of s byte by byte, straight from their definitions in
// heuristic.go, with no masks, blocks or carries: it is the oracle of the
// word-parallel heuristicParams.features, whose hard parts are the shifts across the
// 64-byte blocks and the characters that cross them. Multi-byte characters are classified
// by the same cjkAt and char, decoding the text from its start.
func (p *heuristicParams) featuresNaive(s string) (f [nFeatures]int) {
	n := len(s)
	letter, mbLetter, upper, lower := make([]bool, n), make([]bool, n), make([]bool, n), make([]bool, n)
	digit, space, blank, newline := make([]bool, n), make([]bool, n), make([]bool, n), make([]bool, n)
	punct, pu := make([]bool, n), make([]bool, n) // ASCII punctuation; any punctuation or symbol
	prevCJK, prevEnd := -1, -1
	for i := 0; i < n; {
		b := s[i]
		if b < 0x80 {
			switch {
			case b >= 'a' && b <= 'z':
				letter[i], lower[i] = true, true
			case b >= 'A' && b <= 'Z':
				letter[i], upper[i] = true, true
			case b >= '0' && b <= '9':
				digit[i] = true
			case b == ' ':
				space[i], blank[i] = true, true
			case b == '\n' || b == '\r':
				newline[i] = true
			case b >= '\t' && b <= '\r':
				blank[i] = true
			default:
				punct[i], pu[i] = true, true
			}
			i++
			continue
		}
		size, isLetter := 3, true
		if idx := cjkAt(s, i); idx >= 0 {
			f[fCJK] += int(p.cjk[idx>>2]>>((idx&3)*2)&3) + 1
			if prevEnd == i && p.pairs.has(prevCJK, idx) {
				f[fCJKPair]++
			}
			prevCJK, prevEnd = idx, i+3
		} else {
			size, isLetter = p.char(s, i, &f)
		}
		for k := i; k < i+size; k++ {
			if isLetter {
				letter[k], mbLetter[k] = true, true
			} else {
				pu[k] = true
			}
		}
		i += size
	}
	at := func(m []bool, i int) bool { return i >= 0 && m[i] }
	all := func(m []bool, i, k int) bool { // m at i, i-1, ..., i-k
		for j := i - k; j <= i; j++ {
			if !at(m, j) {
				return false
			}
		}
		return true
	}
	inSpaceWord := make([]bool, n)
	for i := 0; i < n; i++ {
		if letter[i] && !at(letter, i-1) && at(space, i-1) {
			for j := i; j < n && letter[j]; j++ {
				inSpaceWord[j] = true
			}
		}
	}
	for i := 0; i < n; i++ {
		start := letter[i] && !at(letter, i-1)
		onePunct := at(pu, i-1) && !at(pu, i-2) && !at(space, i-2)
		if start {
			f[fWord]++
			if !at(blank, i-1) && !onePunct {
				f[fWordBare]++
			}
			if onePunct {
				f[fPunct]--
			}
			if at(digit, i-1) {
				f[fWordDigit]++
			}
			if mbLetter[i] {
				f[fWordMB]++
				if at(space, i-1) {
					f[fWordMBSpace]++
				}
			}
		}
		if upper[i] && at(lower, i-1) {
			f[fCaseSplit]++
		}
		if all(upper, i, 3) {
			f[fUpper3]++
		}
		if all(lower, i, 10) && inSpaceWord[i] {
			f[fLower10Space]++
		}
		if all(lower, i, 3) && !inSpaceWord[i] {
			f[fLower3]++
		}
		if all(lower, i, 10) && !inSpaceWord[i] {
			f[fLower10]++
		}
		if all(lower, i, 20) && !inSpaceWord[i] {
			f[fLower20]++
		}
		dStart := func(j int) bool { return at(digit, j) && !at(digit, j-1) }
		if dStart(i) {
			f[fDigits]++
		}
		if dStart(i-3) && all(digit, i, 3) || dStart(i-6) && all(digit, i, 6) {
			f[fDigit3]++
		}
		if all(digit, i, 9) {
			f[fDigit9]++
		}
		if pu[i] && !at(pu, i-1) {
			f[fPunct]++
			if at(space, i-1) {
				f[fPunctSpace]++
			}
		}
		p1 := func(j int) bool { return at(punct, j) && at(pu, j-1) }
		if p1(i) {
			f[fPunct1]++
		}
		if p1(i) && p1(i-1) {
			f[fPunct2]++
		}
		if p1(i) && p1(i-1) && p1(i-2) && p1(i-3) {
			f[fPunct4]++
		}
		if newline[i] && !at(newline, i-1) {
			if at(pu, i-1) || at(blank, i-1) {
				f[fNewlineAfter]++
			} else {
				f[fNewline]++
			}
		}
		if blank[i] && !at(blank, i-1) {
			f[fBlank]++
		}
		if at(blank, i-1) && !at(blank, i-2) && (letter[i] || pu[i] && at(space, i-1)) {
			f[fBlank]--
		}
	}
	return f
}

// checkFeatures fails t when features and featuresNaive differ on s for an encoding.
func checkFeatures(t *testing.T, s string) {
	t.Helper()
	for _, e := range []struct {
		name string
		p    *heuristicParams
	}{{"o200k_base", &paramsO200k}, {"cl100k_base", &paramsCL100k}} {
		var got [nFeatures]int
		e.p.features(s, &got)
		if want := e.p.featuresNaive(s); got != want {
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s: feature %d of %q: %d, naive %d", e.name, i, s, got[i], want[i])
				}
			}
		}
	}
}

// readAllCorpora returns the texts of testdata/corpus and its subdirectories, by path.
func readAllCorpora(tb testing.TB) map[string]string {
	tb.Helper()
	texts := map[string]string{}
	for _, pat := range []string{"*.txt", "tuning/*.txt", "heldout/*.txt"} {
		files, err := filepath.Glob(filepath.Join("..", "testdata", "corpus", pat))
		if err != nil || len(files) == 0 {
			tb.Fatalf("no corpus files %s: %v", pat, err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				tb.Fatal(err)
			}
			texts[f] = string(b)
		}
	}
	return texts
}

func TestHeuristicFeaturesCorpus(t *testing.T) {
	for name, text := range readAllCorpora(t) {
		t.Run(filepath.Base(name), func(t *testing.T) {
			checkFeatures(t, text)
			// Windows that start at every offset of the first 130 bytes and end around
			// the block boundaries, so that every byte class meets every boundary.
			for i := 0; i < 130 && i < len(text); i++ {
				for _, n := range []int{1, 7, 8, 9, 63, 64, 65, 127, 128, 129, 200} {
					if i+n <= len(text) {
						checkFeatures(t, text[i:i+n])
					}
				}
			}
		})
	}
}

// featureFragments are the pieces random texts are made of: every byte class, the edges of
// the ranges the classification tests, multi-byte characters of every kind, and broken UTF-8.
var featureFragments = []string{
	"a", "z", "A", "Z", "word", "Title", "UPPER", "camelCase", "HTTPServer", "x", "abcdefghijklmnop",
	"ABCDEFGH", "0", "9", "12345", "1234567890123", " ", "  ", "\t", "\v", "\f", "\n", "\r\n", "\n\n", " \n",
	"!", ".", ",", "{", "}", "\"", ":", "@", "[", "`", "~", "\x00", "\x1f", "\x7f", "->", "...", "\":\"",
	"é", "ß", "Ж", "\u00a0", "©", "ऄ", "—", "€", "\u2fff",
	"あ", "ア", "\u3040", "\u30ff", "\u3000", "。", "「", "ㄅ", "\u3400", "\u4dbf",
	"中", "文", "中文", "一个", "\u4e00", "\u9fff", "\ua000", "가", "힣", "한국", "\uac00", "\ud7a3", "\ud7a4",
	"，", "！", "\uff5e", "\uffe5", "\ufeff", "😀", "\U00020000", "\U0002A6DF", "\U00030000", "\U0010FFFF",
	"\x80", "\xbf", "\xc0", "\xc2", "\xdf", "\xe0", "\xe4", "\xe9\x80", "\xed\xa0\x80", "\xef", "\xef\xbc",
	"\xf0", "\xf0\xa0", "\xf0\xa0\x80", "\xf4\x90\x80\x80", "\xf5", "\xff",
}

// randomText returns a random text of up to max fragments, or of raw random bytes.
func randomText(r *rand.Rand, max int) string {
	var b strings.Builder
	switch r.IntN(4) {
	case 0: // raw bytes, biased to ASCII
		for range r.IntN(max * 3) {
			if r.IntN(3) == 0 {
				b.WriteByte(byte(r.UintN(256)))
			} else {
				b.WriteByte(byte(r.UintN(128)))
			}
		}
	case 1: // random valid runes
		for range r.IntN(max * 2) {
			c := rune(r.Int32N(0x110000))
			if r.IntN(2) == 0 {
				c = rune(r.Int32N(0x10000))
			}
			if utf8.ValidRune(c) {
				b.WriteRune(c)
			}
		}
	default:
		for range r.IntN(max) {
			b.WriteString(featureFragments[r.IntN(len(featureFragments))])
		}
	}
	return b.String()
}

func TestHeuristicFeaturesRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		checkFeatures(t, randomText(r, 60))
	}
	for range 200 { // long texts: long words, digit runs and punctuation runs across blocks
		checkFeatures(t, randomText(r, 2000))
	}
	for _, f := range featureFragments {
		for _, g := range featureFragments {
			checkFeatures(t, f+g)
			checkFeatures(t, strings.Repeat("a", 62)+f+g+" x")
		}
	}
}

// FuzzHeuristicFeatures checks the word-parallel count against the byte-by-byte one.
func FuzzHeuristicFeatures(f *testing.F) {
	for _, text := range readAllCorpora(f) {
		f.Add(text[:min(len(text), 300)])
	}
	for _, s := range featureFragments {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkFeatures(t, s)
	})
}
