package specs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goldenDirs are the adapters' golden request bodies, relative to this module, with the
// rule that names each file's operation. A file no rule knows fails the test, so a new
// golden body cannot go unchecked.
var goldenDirs = []struct {
	dir string
	op  func(name string) (Op, bool)
}{
	{"../../openai/testdata", func(name string) (Op, bool) {
		switch {
		case strings.HasPrefix(name, "request_"):
			return OpChatCompletions, true
		case strings.HasPrefix(name, "responses_"):
			return OpResponses, true
		case strings.HasPrefix(name, "embeddings_"):
			return OpEmbeddings, true
		}
		return "", false
	}},
	{"../../anthropic/testdata", func(string) (Op, bool) { return OpMessages, true }},
	{"../../gemini/testdata", func(name string) (Op, bool) {
		switch {
		case strings.HasPrefix(name, "batch_embed_"):
			return OpBatchEmbedContents, true
		case strings.HasPrefix(name, "embed_"):
			return OpEmbedContent, true
		case strings.HasPrefix(name, "stream"):
			return OpStreamGenerateContent, true
		}
		return OpGenerateContent, true
	}},
}

// TestGoldenRequests validates every golden request body of every adapter against the
// request schema of its operation, and against the rules a schema does not state.
func TestGoldenRequests(t *testing.T) {
	v := specs(t)
	n := 0
	for _, g := range goldenDirs {
		files, err := filepath.Glob(filepath.Join(g.dir, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("no golden files in %s", g.dir)
		}
		for _, f := range files {
			name := filepath.Base(f)
			op, ok := g.op(name)
			if !ok {
				t.Errorf("%s: no operation known for this golden file; add a rule to goldenDirs", f)
				continue
			}
			n++
			t.Run(filepath.Base(filepath.Dir(filepath.Dir(f)))+"/"+name, func(t *testing.T) {
				body, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if err := v.validate(op, body); err != nil {
					t.Errorf("%s does not match %s:\n%v", f, op, err)
				}
				for _, p := range checkRules(op, body) {
					t.Errorf("%s: %s", f, p)
				}
			})
		}
	}
	t.Logf("%d golden request bodies validated", n)
}
