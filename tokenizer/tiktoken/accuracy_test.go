package tiktoken_test

import (
	"fmt"
	"github.com/llmclient/llmclient/estimate"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmclient/llmclient/tokenizer/tiktoken"
)

// corpus is one file of ../../testdata/corpus (see its README.md): the files in the
// directory itself and in tuning/ are the tuning set the heuristic's weights were fitted on,
// those in heldout/ were not used to fit them. Chat holds one message per line, counted one
// by one as a conversation's messages are.
type corpus struct {
	name  string // path under testdata/corpus, without .txt
	texts []string
}

func loadCorpora(tb testing.TB) []corpus {
	tb.Helper()
	var out []corpus
	root := filepath.Join("..", "..", "testdata", "corpus")
	for _, dir := range []string{"", "tuning", "heldout"} {
		files, err := filepath.Glob(filepath.Join(root, dir, "*.txt"))
		if err != nil || len(files) == 0 {
			tb.Fatalf("no corpus in %s: %v", filepath.Join(root, dir), err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				tb.Fatal(err)
			}
			texts := []string{string(b)}
			if filepath.Base(f) == "chat.txt" {
				texts = strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			}
			name := strings.TrimSuffix(filepath.ToSlash(filepath.Join(dir, filepath.Base(f))), ".txt")
			out = append(out, corpus{name: name, texts: texts})
		}
	}
	return out
}

func (c corpus) bytes() int {
	n := 0
	for _, t := range c.texts {
		n += len(t)
	}
	return n
}

// models stand for the encodings: EncodingForModel maps them.
var models = []struct{ model, encoding string }{
	{"gpt-4o", tiktoken.O200kBase},
	{"gpt-4", tiktoken.CL100kBase},
}

// TestHeuristicAccuracy checks the heuristic estimator against the exact count on every
// corpus, tuning and held-out, for each encoding: within +10% and never more than 5% under.
// Run with -v for the table.
func TestHeuristicAccuracy(t *testing.T) {
	h := estimate.Heuristic{}
	corpora := loadCorpora(t)
	for _, m := range models {
		if got := estimate.EncodingForModel(m.model); got != m.encoding {
			t.Fatalf("EncodingForModel(%q) = %q, want %q", m.model, got, m.encoding)
		}
		for _, c := range corpora {
			var exact, est int
			for _, text := range c.texts {
				n, err := tiktoken.Count(m.encoding, text)
				if err != nil {
					t.Fatal(err)
				}
				exact += n
				est += h.CountTokens(m.model, text)
			}
			errPct := 100 * (float64(est)/float64(exact) - 1)
			t.Logf("%-11s %-40s exact=%6d heuristic=%6d error=%+5.1f%%", m.encoding, c.name, exact, est, errPct)
			if errPct > 10 || errPct < -5 {
				t.Errorf("%s on %s: heuristic %d vs exact %d (%+.1f%%), want within -5%%..+10%%",
					m.encoding, c.name, est, exact, errPct)
			}
		}
	}
}

func BenchmarkHeuristic(b *testing.B) {
	h := estimate.Heuristic{}
	for _, m := range models {
		for _, c := range loadCorpora(b) {
			b.Run(fmt.Sprintf("%s/%s", m.encoding, c.name), func(b *testing.B) {
				b.SetBytes(int64(c.bytes()))
				b.ReportAllocs()
				for b.Loop() {
					for _, text := range c.texts {
						h.CountTokens(m.model, text)
					}
				}
			})
		}
	}
}

func BenchmarkExact(b *testing.B) {
	e := tiktoken.Estimator{}
	for _, m := range models {
		e.CountTokens(m.model, "warm up") // load the encoding outside the timing
		for _, c := range loadCorpora(b) {
			b.Run(fmt.Sprintf("%s/%s", m.encoding, c.name), func(b *testing.B) {
				b.SetBytes(int64(c.bytes()))
				b.ReportAllocs()
				for b.Loop() {
					for _, text := range c.texts {
						e.CountTokens(m.model, text)
					}
				}
			})
		}
	}
}
