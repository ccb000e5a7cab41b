package llmclient

import (
	"testing"
	"time"
)

// TestOutputFit: calls whose duration is a line in their output tokens (300 ms plus 2 ms
// a token) that all stopped short of their reserved output still bound a call that will
// produce all of it; calls whose outputs are alike bound it by their time per token; and
// the fit says nothing before outputMinCalls calls.
func TestOutputFit(t *testing.T) {
	line := func(out int) time.Duration { return 300*time.Millisecond + time.Duration(out)*2*time.Millisecond }
	var f outputFit
	for i, out := range []int{300, 520, 410, 700, 350, 610, 480} {
		if i < outputMinCalls && f.expect(1024) != 0 {
			t.Fatalf("expect after %d calls: %v, want 0 (unknown)", i, f.expect(1024))
		}
		f.add(out, line(out))
	}
	if got, want := f.expect(1024), line(1024); got < want || got > want+want/20 {
		t.Fatalf("expect(1024) = %v, want about %v (the line at the reserved output)", got, want)
	}
	var alike outputFit
	for range 10 {
		alike.add(500, line(500))
	}
	if got, want := alike.expect(1000), 2*line(500); got < line(1000) || got > want+time.Millisecond {
		t.Fatalf("alike outputs: expect(1000) = %v, want between %v and %v (twice the time of 500 tokens)", got, line(1000), want)
	}
	var huge outputFit
	for _, out := range []int{-1, 0, maxInt, 1 << 62, 10} {
		huge.add(out, time.Duration(maxInt))
	}
	if got := huge.expect(maxInt); got <= 0 || got > maxService {
		t.Fatalf("extreme samples: expect %v, want within (0, %v]", got, maxService)
	}
}
