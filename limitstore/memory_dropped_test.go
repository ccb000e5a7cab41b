package limitstore

import (
	"runtime"
	"strconv"
	"testing"
)

// TestMemoryStoreForgetsCollectedScopes: the store remembers the scopes a sweep dropped
// only while a caller may hold them; once collected, the next sweep forgets them, so a
// stream of distinct names keeps the store bounded.
func TestMemoryStoreForgetsCollectedScopes(t *testing.T) {
	s := NewMemory().(*memoryStore)
	spec := Spec{Requests: Rate{PerSecond: 1, Burst: 1}, BatchShare: 1}
	held := s.Open("held", spec)
	n := 0
	for range 8 {
		for range memorySweepMin + 100 {
			s.Open("name-"+strconv.Itoa(n), spec)
			n++
		}
		runtime.GC() // what nothing holds is collected
	}
	s.mu.Lock()
	dropped, scopes := len(s.dropped), len(s.scopes)
	_, remembered := s.dropped["held"]
	s.mu.Unlock()
	if dropped+scopes > 3*memorySweepMin {
		t.Fatalf("%d scopes and %d dropped ones remembered after %d names", scopes, dropped, n)
	}
	if _, kept := s.scopes["held"]; !kept && !remembered {
		t.Fatal("a scope still held was forgotten")
	}
	if s.Open("held", spec) != held {
		t.Fatal("Open returned another state for a scope still held")
	}
}
