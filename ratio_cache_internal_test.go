package llmclient

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// TestRatioCacheMatchesTheRules: with its cache, info answers what matching the rules
// answers (the ratio and the family), for names that share slots (each replacing the other), names too
// long to keep, the empty name, and many goroutines at once.
func TestRatioCacheMatchesTheRules(t *testing.T) {
	lc := limiterConfig{ratios: []tokenRatio{{"gpt-4o", 1.1}, {"mini", 0.9}, {"claude-3-haiku", 2}},
		ratioMemo: new(ratioCache), familySet: new(familySet)}
	names := []string{"", "m", "gpt-4o", "gpt-4o-mini", "claude-sonnet-4-5", "claude-3-haiku-20240307",
		"gemini-2.5-pro", "x-gemini-claude", strings.Repeat("c", 200) + "claude", strings.Repeat("g", 129)}
	for i := range 300 { // far more names than slots: every slot is shared and replaced
		names = append(names, fmt.Sprintf("model-%d-%s", i, []string{"claude", "gemini", "mini", "gpt"}[i%4]))
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 5_000 {
				name := names[rng.IntN(len(names))]
				got, want := lc.info(name), lc.matchInfo(name)
				if got.ratio != want.ratio || got.family != want.family || got.fam != want.fam {
					t.Errorf("info(%q) = %+v, want %+v", name, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
	if lc.ratioMemo.cacheable(names[len(names)-300-1]) {
		t.Error("a name over 128 bytes is kept")
	}
}
