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
		if i < outputMinCalls && fitAt(&f, 1024) != 0 {
			t.Fatalf("expect after %d calls: %v, want 0 (unknown)", i, fitAt(&f, 1024))
		}
		f.add(out, line(out), 1)
	}
	if got, want := fitAt(&f, 1024), line(1024); got < want || got > want+want/20 {
		t.Fatalf("expect(1024) = %v, want about %v (the line at the reserved output)", got, want)
	}
	var alike outputFit
	for range 10 {
		alike.add(500, line(500), 1)
	}
	if got, want := fitAt(&alike, 1000), 2*line(500); got < line(1000) || got > want+time.Millisecond {
		t.Fatalf("alike outputs: expect(1000) = %v, want between %v and %v (twice the time of 500 tokens)", got, line(1000), want)
	}
	var short outputFit // one token in 200 ms: the line is not taken past two tokens
	for range 10 {
		short.add(1, 200*time.Millisecond, 1)
	}
	if got := fitAt(&short, 1024); got > 400*time.Millisecond {
		t.Fatalf("one-token answers: expect(1024) = %v, want at most 400ms", got)
	}
	var huge outputFit
	for _, out := range []int{-1, 0, maxInt, 1 << 62, 10} {
		huge.add(out, time.Duration(maxInt), 1)
	}
	if got := fitAt(&huge, maxInt); got <= 0 || got > maxService {
		t.Fatalf("extreme samples: expect %v, want within (0, %v]", got, maxService)
	}
}

// fitAt is f's full estimate for out, at the time of its samples.
func fitAt(f *outputFit, out int) time.Duration {
	full, _ := f.expect(out, 1)
	return full
}
