package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// guides are the documents whose Go code must compile, relative to this directory.
// docs/gateway.md shows a nested module's code and is checked with it.
var guides = []string{"../README.md", "*.md"}

// skipGuides are matched by the patterns above but checked elsewhere.
var skipGuides = map[string]bool{"gateway.md": true}

// TestGuideCodeCompiles checks that every ```go block of a guide is a contiguous excerpt of
// a Go file in the repository (blank lines and indentation aside). Every module's files
// are compiled by its own tests, so the code the guides show compiles; a block that was
// edited in a guide and not in code, or the reverse, fails here.
func TestGuideCodeCompiles(t *testing.T) {
	sources := goSources(t, "..")
	var files []string
	for _, pattern := range guides {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			if !skipGuides[filepath.Base(f)] {
				files = append(files, f)
			}
		}
	}
	if len(files) < 2 {
		t.Fatalf("found the guides %v: the patterns no longer match", files)
	}
	blocks := 0
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range goBlocks(string(text)) {
			blocks++
			if !excerptOfAny(b.code, sources) {
				t.Errorf("%s:%d: this ```go block is in no Go file of the repository; put it in docs/guides_test.go "+
					"(or quote a nested module's example verbatim):\n%s", f, b.line, b.code)
			}
		}
	}
	if blocks == 0 {
		t.Fatal("no ```go blocks found in the guides")
	}
}

type block struct {
	line int
	code string
}

// goBlocks returns the ```go fenced blocks of a Markdown text, normalized.
func goBlocks(md string) []block {
	var out []block
	var cur []string
	in, start := false, 0
	for i, l := range strings.Split(md, "\n") {
		switch {
		case !in && strings.TrimSpace(l) == "```go":
			in, start, cur = true, i+1, nil
		case in && strings.TrimSpace(l) == "```":
			in = false
			out = append(out, block{line: start, code: normalize(strings.Join(cur, "\n"))})
		case in:
			cur = append(cur, l)
		}
	}
	return out
}

// normalize drops blank lines and reduces every run of spaces and tabs to one space, so
// that indentation (a snippet shown at the top level, compiled inside a function) and
// gofmt's alignment of comments do not matter.
func normalize(code string) string {
	var b strings.Builder
	for _, l := range strings.Split(code, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			b.WriteString(strings.Join(f, " "))
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// goSources returns every Go file under root, normalized.
func goSources(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out = append(out, "\n"+normalize(string(b)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func excerptOfAny(code string, sources []string) bool {
	for _, s := range sources {
		if strings.Contains(s, "\n"+code) {
			return true
		}
	}
	return false
}
