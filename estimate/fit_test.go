package estimate

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tk "github.com/pkoukk/tiktoken-go"
	loader "github.com/pkoukk/tiktoken-go-loader"
)

var fitWeights = flag.Bool("fit", false, "fit the heuristic's weights on the tuning corpus and print them")

// featureNames name the features in the order of their constants, for the fit's output.
var featureNames = [nFeatures]string{
	"fWord", "fWordBare", "fWordDigit", "fWordMB", "fWordMBSpace", "fCaseSplit", "fUpper3",
	"fLower10Space", "fLower3", "fLower10", "fLower20", "fDigits", "fDigit3", "fDigit9", "fPunct", "fPunctSpace",
	"fPunct1", "fPunct2", "fPunct4", "fNewline", "fNewlineAfter", "fBlank", "fCJK", "fCJKPair",
	"fLatinExt", "fOther3", "fCJKPunct", "fSymbol", "fEmoji", "fInvalid",
}

// fitPrior is what the fit pulls each weight towards, in tokens, with a small weight: a
// feature the tuning corpus hardly has keeps it.
var fitPrior = [nFeatures]float64{fWord: 1, fWordBare: 0.1, fWordMB: -1, fCaseSplit: 1, fUpper3: 0.3,
	fLower10Space: 0.2, fLower3: 0.05, fLower10: 0.25, fDigits: 1, fDigit3: 1, fDigit9: 0.33, fPunct: 1,
	fPunct1: 0.1, fPunct2: 0.3, fPunct4: 0.3, fNewline: 1, fBlank: 1, fCJK: 1, fCJKPair: -0.95,
	fLatinExt: 0.4, fOther3: 0.5, fCJKPunct: 0.2, fSymbol: 0.5, fEmoji: 1.5, fInvalid: 1}

// fitNonNegative are the weights of lengths, which the fit keeps at zero or above: a longer
// word or run never costs fewer tokens.
var fitNonNegative = map[int]bool{fUpper3: true, fLower10Space: true, fLower3: true, fLower10: true,
	fPunct2: true, fPunct4: true}

// fitFixed are the weights that are not fitted, in tokens: every group of up to three
// digits is one token in both encodings. fLower20 is set after the fit so that a lower-case
// letter after twenty costs a quarter token: the corpus has too few such runs to fit it, and
// the lengths fitted on identifiers overcharge long runs (a hundred "a"s are 13 tokens).
var fitFixed = map[int]float64{fDigits: 1, fDigit3: 1, fDigit9: 1.0 / 3, fLower20: 0}

// TestFitHeuristicWeights fits the weights of heuristic.go by least squares on the
// tuning corpus (../testdata/corpus/*.txt and tuning/*.txt, never heldout/) and prints them:
//
//	go test -run TestFitHeuristicWeights -fit -v .
//
// The samples are the lines of a corpus, grouped into runs of at least 256 bytes (a message
// of chat.txt is one), never split between newlines that the pre-tokenizer joins: each one's
// exact count with tiktoken against its features in context. Each kind of text (Go code, Chinese, and each other
// file) weighs the same, and within a kind each file the same, relative to its tokens.
func TestFitHeuristicWeights(t *testing.T) {
	if !*fitWeights {
		t.Skip("run with -fit")
	}
	tk.SetBpeLoader(loader.NewOfflineLoader())
	var files []string
	for _, pat := range []string{"*.txt", "tuning/*.txt"} {
		m, err := filepath.Glob(filepath.Join("..", "testdata", "corpus", pat))
		if err != nil || len(m) == 0 {
			t.Fatalf("no tuning corpus %s: %v", pat, err)
		}
		files = append(files, m...)
	}
	kind := func(f string) string {
		switch base := filepath.Base(f); {
		case strings.HasPrefix(base, "go_") || base == "code_go.txt":
			return "go"
		case strings.HasPrefix(base, "zh_") || base == "chinese.txt":
			return "zh"
		default:
			return base
		}
	}
	perKind := map[string]int{}
	for _, f := range files {
		perKind[kind(f)]++
	}
	for _, e := range []struct {
		name string
		p    *heuristicParams
	}{{"o200k_base", &paramsO200k}, {"cl100k_base", &paramsCL100k}} {
		enc, err := tk.GetEncoding(e.name)
		if err != nil {
			t.Fatal(err)
		}
		var a [nFeatures][nFeatures]float64
		var b [nFeatures]float64
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			texts := []string{string(data)}
			if filepath.Base(f) == "chat.txt" {
				texts = strings.Split(strings.TrimRight(string(data), "\n"), "\n")
			}
			type sample struct {
				x     [nFeatures]float64
				exact float64
			}
			var samples []sample
			total := 0
			for _, text := range texts {
				var before [nFeatures]int
				start := 0
				for end := 0; end < len(text); {
					end += strings.IndexByte(text[end:], '\n') + 1
					if end == 0 {
						end = len(text)
					}
					if end-start < 256 && end < len(text) {
						continue
					}
					if rest := strings.TrimLeft(text[end:], " \t\v\f"); rest != "" && (rest[0] == '\n' || rest[0] == '\r') {
						continue // the pre-tokenizer joins newlines across blanks
					}
					var after [nFeatures]int
					e.p.features(text[:end], &after)
					var s sample
					for i := range s.x {
						s.x[i] = float64(after[i] - before[i])
					}
					n := len(enc.EncodeOrdinary(text[start:end]))
					s.exact = float64(n)
					total += n
					samples = append(samples, s)
					before, start = after, end
				}
			}
			w := 1 / float64(total) / float64(perKind[kind(f)])
			for _, s := range samples {
				for i := range nFeatures {
					b[i] += w * s.x[i] * s.exact
					for j := range nFeatures {
						a[i][j] += w * s.x[i] * s.x[j]
					}
				}
			}
		}
		const ridge = 0.02
		for i := range nFeatures {
			a[i][i] += ridge
			b[i] += ridge * fitPrior[i]
		}
		// Least squares; a length weight that comes out negative is pinned to zero and the
		// rest fitted again.
		pinned := map[int]bool{}
		var x [nFeatures]float64
		for {
			a2, b2 := a, b
			for i := range pinned {
				a2[i][i] += 1e9
			}
			for i, v := range fitFixed {
				a2[i][i] += 1e9
				b2[i] += 1e9 * v
			}
			x = solveLinear(a2, b2)
			more := false
			for i := range fitNonNegative {
				if x[i] < 0 && !pinned[i] {
					pinned[i], more = true, true
				}
			}
			if !more {
				break
			}
		}
		x[fLower20] = min(0, 0.25-x[fLower3]-x[fLower10])
		var out strings.Builder
		for i, v := range x {
			fmt.Fprintf(&out, "%s: %d, ", featureNames[i], int64(math.Round(v*64)))
		}
		t.Logf("weights%s = [nFeatures]int64{%s}", map[string]string{"o200k_base": "O200k", "cl100k_base": "CL100k"}[e.name],
			strings.TrimSuffix(out.String(), ", "))
	}
}

// solveLinear solves a x = b by Gaussian elimination with partial pivoting.
func solveLinear(a [nFeatures][nFeatures]float64, b [nFeatures]float64) (x [nFeatures]float64) {
	for c := range nFeatures {
		p := c
		for r := c + 1; r < nFeatures; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[p][c]) {
				p = r
			}
		}
		a[c], a[p] = a[p], a[c]
		b[c], b[p] = b[p], b[c]
		for r := c + 1; r < nFeatures; r++ {
			k := a[r][c] / a[c][c]
			for j := c; j < nFeatures; j++ {
				a[r][j] -= k * a[c][j]
			}
			b[r] -= k * b[c]
		}
	}
	for r := nFeatures - 1; r >= 0; r-- {
		s := b[r]
		for j := r + 1; j < nFeatures; j++ {
			s -= a[r][j] * x[j]
		}
		x[r] = s / a[r][r]
	}
	return x
}
