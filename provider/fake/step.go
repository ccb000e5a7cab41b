package fake

import (
	"context"

	"github.com/llmclient/llmclient"
)

// Step is one scripted outcome, or a group of them, in a Provider's script. Build steps with
// Reply, Stream, StreamChunks, Fail, FailClass, Error and Func; group them with Repeat and
// Loop. The set of step kinds is closed: only this package implements Step.
//
// A step is a value under construction until it is passed to New, which copies it:
// changing a step afterwards does not change the Provider's script.
type Step interface {
	// compile appends the step's script entries to dst and returns the extended slice.
	compile(dst []entry) []entry
}

// leaf is a step that answers one call.
type leaf interface {
	Step
	// clone returns a copy that shares no mutable state with the original.
	clone() leaf
	// play answers one call. stream selects Provider.Stream over Provider.Complete; n is the
	// 1-based number of the call in the script, used for response ids.
	play(ctx context.Context, call *llmclient.Call, stream bool, n int) (*llmclient.Response, llmclient.ProviderStream, error)
}

// entry is one instruction of a compiled script: a leaf played times times (or forever), or
// a jump back to target taken times times (or forever).
type entry struct {
	leaf    leaf // nil for a jump
	times   int
	forever bool
	target  int // jumps only
}

// playable reports whether the entry can serve at least one call.
func (e *entry) playable() bool { return e.leaf != nil && (e.forever || e.times > 0) }

// repeat is the step built by Repeat and Loop.
type repeat struct {
	n       int // plays of the whole group; ignored when forever
	forever bool
	steps   []Step
}

// Repeat returns a step that plays the given steps in order, n times over. Each round
// starts afresh, so Repeat(2, Reply("a").Times(2), Fail(503)) serves a, a, 503, a, a, 503.
// Repeat with n < 1, or with no step that can serve a call, serves nothing. Groups nest.
func Repeat(n int, steps ...Step) Step {
	return &repeat{n: n, steps: steps}
}

// Loop returns a step that plays the given steps in order and starts over after the last,
// forever: fake.New(fake.Loop(a, b)) serves a, b, a, b, ... and never runs out. Steps placed
// after a Loop in a script are never reached. A Loop with no step that can serve a call
// serves nothing.
func Loop(steps ...Step) Step {
	return &repeat{forever: true, steps: steps}
}

func (r *repeat) compile(dst []entry) []entry {
	if r == nil || !r.forever && r.n < 1 {
		return dst
	}
	start := len(dst)
	for _, s := range r.steps {
		if s != nil {
			dst = s.compile(dst)
		}
	}
	body := dst[start:]
	for i := range body {
		if body[i].playable() {
			if r.forever || r.n > 1 {
				dst = append(dst, entry{times: r.n - 1, forever: r.forever, target: start})
			}
			return dst
		}
	}
	return dst[:start] // nothing to serve: drop the body so no loop spins over it
}

// FuncStep is a step that decides its outcome when the call arrives. Build it with Func.
type FuncStep struct {
	f       func(call *llmclient.Call) Step
	times   int
	forever bool
}

// Func returns a step that calls f with the incoming call and plays the step f returns,
// once: for example a Fail for one API key and a Reply for the others. The returned step's
// Latency applies; its Times and Forever are ignored. f may return another Func step; it
// must not return nil, Repeat or Loop (the call then fails with an error that says so).
// f runs without the Provider's lock held, possibly on several goroutines at once, and
// must not modify call.
func Func(f func(call *llmclient.Call) Step) *FuncStep {
	return &FuncStep{f: f, times: 1}
}

// Times makes the step serve n calls (default 1); n < 1 removes it from the script.
func (s *FuncStep) Times(n int) *FuncStep { s.times = n; return s }

// Forever makes the step serve every call from now on; steps after it are never reached.
func (s *FuncStep) Forever() *FuncStep { s.forever = true; return s }

func (s *FuncStep) compile(dst []entry) []entry {
	if s == nil {
		return dst
	}
	return append(dst, entry{leaf: s.clone(), times: s.times, forever: s.forever})
}

func (s *FuncStep) clone() leaf { c := *s; return &c }

func (s *FuncStep) play(ctx context.Context, call *llmclient.Call, stream bool, n int) (*llmclient.Response, llmclient.ProviderStream, error) {
	// Follow chains of Func steps iteratively; each hop is the user's own decision.
	var next Step = s
	for {
		fs, ok := next.(*FuncStep)
		if !ok {
			break
		}
		if fs == nil || fs.f == nil {
			return nil, nil, misuse("fake: Func step with a nil function")
		}
		next = fs.f(call)
	}
	l, ok := next.(leaf)
	if !ok || l == nil || isNilLeaf(l) {
		return nil, nil, misuse("fake: Func must return a Reply, Stream, Fail, Error or Func step")
	}
	return l.play(ctx, call, stream, n)
}

// isNilLeaf reports whether l is a typed nil pointer, such as a nil *ReplyStep.
func isNilLeaf(l leaf) bool {
	switch v := l.(type) {
	case *ReplyStep:
		return v == nil
	case *StreamStep:
		return v == nil
	case *FailStep:
		return v == nil
	case *ErrorStep:
		return v == nil
	}
	return false
}
