package llmclient

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// The optimised heuristic must return exactly what the frozen copy in
// estimate_reference_test.go returns, for every encoding and every text.

// equivParams are the encodings' weights, by name.
var equivParams = []struct {
	name string
	p    *heuristicParams
}{{"o200k_base", &paramsO200k}, {"cl100k_base", &paramsCL100k}}

// checkEquivalent fails t when count and countReference differ on s for any encoding, or
// when CountTokens picks other weights than the reference EncodingForModel for s as a model.
func checkEquivalent(t *testing.T, s string) {
	t.Helper()
	for _, e := range equivParams {
		if got, want := e.p.count(s), e.p.countReference(s); got != want {
			t.Fatalf("%s: count(%q) = %d, countReference = %d", e.name, s, got, want)
		}
	}
	wantP := &paramsO200k
	if encodingForModelReference(s) == "cl100k_base" {
		wantP = &paramsCL100k
	}
	if got, want := EncodingForModel(s), encodingForModelReference(s); got != want {
		t.Fatalf("EncodingForModel(%q) = %s, reference %s", s, got, want)
	}
	if heuristicFor(s) != wantP {
		t.Fatalf("heuristicFor(%q) picks other weights than the reference", s)
	}
}

// readCorpora returns the texts of testdata/corpus, by file name.
func readCorpora(tb testing.TB) map[string]string {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.txt"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no corpus files: %v", err)
	}
	texts := make(map[string]string, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		texts[filepath.Base(f)] = string(b)
	}
	return texts
}

func TestHeuristicEquivalenceCorpus(t *testing.T) {
	for name, text := range readCorpora(t) {
		t.Run(name, func(t *testing.T) {
			checkEquivalent(t, text)
			for line := range strings.Lines(text) {
				checkEquivalent(t, line)
				checkEquivalent(t, strings.TrimRight(line, "\n"))
			}
			// Every prefix and suffix, and every window of up to 24 bytes, so that each
			// byte of the corpus is once the last or first one of a text (the ends are
			// where the eight-byte scans hand over to the byte-wise ones).
			for i := range len(text) {
				checkEquivalent(t, text[:i])
				checkEquivalent(t, text[i:])
				for n := 1; n <= 24 && i+n <= len(text); n++ {
					checkEquivalent(t, text[i:i+n])
				}
			}
		})
	}
}

// equivFragments are the pieces random texts are made of: every byte class, the edges of
// the ranges the walk tests, multi-byte characters of every kind, and broken UTF-8.
var equivFragments = []string{
	"a", "z", "A", "Z", "word", "Title", "UPPER", "camelCase", "HTTPServer", "x",
	"abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0", "9", "12345", "1234567890",
	" ", "  ", "\t", "\v", "\f", "\n", "\r\n", "\n\n", " \n", "\t\n ",
	"!", ".", ",", "{", "}", "\"", ":", "@", "[", "`", "~", "\x00", "\x1f", "\x7f", "->", "...", "\":\"",
	"é", "ß", "Ж", "ω", "א", "ع", "\u00a0", "©", "\u00c0", // two-byte letters and Latin-1 symbols
	"ऄ", "ก", "ꀀ", "—", "€", "→", "\u2fff", // other three-byte letters, E2 symbols
	"あ", "ア", "ー", "\u3040", "\u30ff", "\u3000", "。", "「", "ㄅ", "\u3400", "\u4dbf", // kana, CJK punct, ext A
	"中", "文", "\u4e00", "\u9fff", "\ua000", "가", "힣", "\uac00", "\ud7a3", "\ud7a4", // ideographs, Yi, Hangul
	"，", "！", "\uff5e", "\uffe5", "\ufeff", // full-width punctuation (EF BC, EF BD) and others
	"😀", "👍🏽", "\U0001F600", "\U00020000", "\U0002A6DF", "\U00030000", "\U0010FFFF", // emoji, extension planes
	"\x80", "\xbf", "\xc0", "\xc1", "\xc2", "\xdf", "\xe0", "\xe4", "\xe9\x80", "\xed\xa0\x80", "\xef", "\xef\xbc",
	"\xf0", "\xf0\xa0", "\xf0\xa0\x80", "\xf4\x90\x80\x80", "\xf5", "\xff", // truncated, surrogates, invalid
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
	case 1: // random valid runes of any plane
		for range r.IntN(max * 2) {
			c := rune(r.Int32N(0x110000))
			if r.IntN(2) == 0 {
				c = rune(r.Int32N(0x10000))
			}
			if utf8.ValidRune(c) {
				b.WriteRune(c)
			}
		}
	default: // fragments
		for range r.IntN(max) {
			b.WriteString(equivFragments[r.IntN(len(equivFragments))])
		}
	}
	return b.String()
}

func TestHeuristicEquivalenceRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		s := randomText(r, 40)
		checkEquivalent(t, s)
	}
	// Long texts, to cover long words, digit groups and punctuation runs.
	for range 200 {
		checkEquivalent(t, randomText(r, 2000))
	}
	for _, f := range equivFragments {
		for _, g := range equivFragments {
			checkEquivalent(t, f+g)
			checkEquivalent(t, " "+f+g+"x")
		}
	}
}

func TestEncodingForModelEquivalence(t *testing.T) {
	for _, m := range []string{"", "g", "gpt-4", "gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.5-preview",
		"gpt-4-turbo", "gpt-4-32k", "gpt-3.5-turbo", "gpt-35-turbo", "text-embedding-3-small",
		"text-davinci", "o1", "o3-mini", "gpt-5", "gpt-oss-120b", "claude-sonnet-4", "gemini-2.5-pro",
		"openai/gpt-4", "azure/gpt-35-turbo", "a/b/gpt-4o", "gpt-4/", "/gpt-4", "tgpt-4", "GPT-4"} {
		checkEquivalent(t, m)
	}
	// Every prefix of every name the rules test, with every suffix that changes a rule,
	// with and without a vendor prefix.
	for _, k := range []string{"gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-4", "gpt-3.5", "gpt-35", "text-embedding-"} {
		for j := range len(k) + 1 {
			for _, suffix := range []string{"", "o", ".1", ".5", ".2", ".", "-", "x", "-turbo", "/"} {
				for _, vendor := range []string{"", "openai/", "a/b/", "/"} {
					checkEquivalent(t, vendor+k[:j]+suffix)
				}
			}
		}
	}
}

func FuzzHeuristicEquivalence(f *testing.F) {
	for _, text := range readCorpora(f) {
		for line := range strings.Lines(text) {
			f.Add(line)
		}
	}
	for _, s := range equivFragments {
		f.Add(s)
	}
	f.Add("openai/gpt-4-turbo")
	f.Add("gpt-4o")
	f.Fuzz(func(t *testing.T, s string) {
		checkEquivalent(t, s)
	})
}

// BenchmarkCountVsReference compares the walk with its frozen copy in one binary, which is
// less noisy than comparing two runs of BenchmarkHeuristicEstimator.
func BenchmarkCountVsReference(b *testing.B) {
	corpora := readCorpora(b)
	for _, name := range []string{"english", "chinese", "code_go", "json", "chat"} {
		data := corpora[name+".txt"]
		texts := []string{data}
		if name == "chat" {
			texts = strings.Split(strings.TrimRight(data, "\n"), "\n")
		}
		for _, impl := range []string{"new", "ref"} {
			b.Run(name+"/"+impl, func(b *testing.B) {
				p := &paramsO200k
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					for _, t := range texts {
						if impl == "new" {
							p.count(t)
						} else {
							p.countReference(t)
						}
					}
				}
			})
		}
	}
}
