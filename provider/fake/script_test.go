package fake_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/provider/fake"
)

func TestScriptOrder(t *testing.T) {
	tests := []struct {
		name  string
		steps []fake.Step
		want  []string
	}{
		{"in order", []fake.Step{fake.Reply("a"), fake.Fail(429), fake.Reply("b")},
			[]string{"a", "429", "b", "exhausted", "exhausted"}},
		{"empty", nil, []string{"exhausted"}},
		{"nil steps skipped", []fake.Step{nil, fake.Reply("a"), nil}, []string{"a", "exhausted"}},
		{"times", []fake.Step{fake.Reply("a").Times(2), fake.Fail(500)},
			[]string{"a", "a", "500", "exhausted"}},
		{"times zero skips", []fake.Step{fake.Reply("a").Times(0), fake.Fail(500).Times(-1), fake.Reply("b")},
			[]string{"b", "exhausted"}},
		{"forever", []fake.Step{fake.Reply("a"), fake.Fail(503).Forever(), fake.Reply("never")},
			[]string{"a", "503", "503", "503", "503"}},
		{"repeat", []fake.Step{fake.Repeat(2, fake.Reply("a").Times(2), fake.Fail(503)), fake.Reply("z")},
			[]string{"a", "a", "503", "a", "a", "503", "z", "exhausted"}},
		{"repeat once", []fake.Step{fake.Repeat(1, fake.Reply("a"), fake.Reply("b"))},
			[]string{"a", "b", "exhausted"}},
		{"repeat zero", []fake.Step{fake.Repeat(0, fake.Reply("a")), fake.Reply("z")},
			[]string{"z", "exhausted"}},
		{"nested repeat", []fake.Step{fake.Repeat(2, fake.Reply("x"), fake.Repeat(2, fake.Fail(500)))},
			[]string{"x", "500", "500", "x", "500", "500", "exhausted"}},
		{"loop", []fake.Step{fake.Reply("first"), fake.Loop(fake.Fail(503), fake.Reply("ok"))},
			[]string{"first", "503", "ok", "503", "ok", "503"}},
		{"loop of nothing", []fake.Step{fake.Loop(fake.Reply("a").Times(0), fake.Repeat(0, fake.Reply("b"))), fake.Reply("z")},
			[]string{"z", "exhausted"}},
		{"loop inside repeat", []fake.Step{fake.Repeat(3, fake.Reply("a"), fake.Loop(fake.Reply("b")))},
			[]string{"a", "b", "b", "b", "b"}},
		{"repeat inside loop", []fake.Step{fake.Loop(fake.Repeat(2, fake.Reply("a")), fake.Reply("b").Times(2))},
			[]string{"a", "a", "b", "b", "a", "a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fake.New(tt.steps...)
			equal(t, completeN(p, len(tt.want)), tt.want)
		})
	}
}

func TestExhaustedError(t *testing.T) {
	p := fake.New(fake.Reply("a").Times(2))
	completeN(p, 2)
	_, err := p.Complete(context.Background(), call("m"))
	var e *llmclient.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want *llmclient.Error", err)
	}
	if e.Class != failure.Unknown || !errors.Is(err, fake.ErrExhausted) {
		t.Errorf("class = %v, Is(ErrExhausted) = %v", e.Class, errors.Is(err, fake.ErrExhausted))
	}
	if want := "llmclient: unknown: fake: script exhausted after 2 calls"; err.Error() != want {
		t.Errorf("message = %q, want %q", err.Error(), want)
	}
	if _, err := p.Stream(context.Background(), call("m")); !errors.Is(err, fake.ErrExhausted) {
		t.Errorf("Stream err = %v, want ErrExhausted", err)
	}
	if got := p.Calls(); got != 4 {
		t.Errorf("Calls() = %d, want 4", got)
	}
}

func TestRemaining(t *testing.T) {
	tests := []struct {
		name  string
		steps []fake.Step
		calls int
		want  int
	}{
		{"empty", nil, 0, 0},
		{"fresh", []fake.Step{fake.Reply("a").Times(3), fake.Fail(500)}, 0, 4},
		{"part used", []fake.Step{fake.Reply("a").Times(3), fake.Fail(500)}, 1, 3},
		{"all used", []fake.Step{fake.Reply("a").Times(3), fake.Fail(500)}, 4, 0},
		{"past the end", []fake.Step{fake.Reply("a")}, 3, 0},
		{"times zero", []fake.Step{fake.Reply("a").Times(0)}, 0, 0},
		{"forever ahead", []fake.Step{fake.Reply("a"), fake.Fail(503).Forever()}, 0, -1},
		{"forever reached", []fake.Step{fake.Reply("a"), fake.Fail(503).Forever()}, 5, -1},
		{"loop", []fake.Step{fake.Loop(fake.Reply("a"))}, 2, -1},
		{"repeat", []fake.Step{fake.Repeat(3, fake.Reply("a"), fake.Reply("b").Times(2))}, 0, 9},
		{"repeat midway", []fake.Step{fake.Repeat(3, fake.Reply("a"), fake.Reply("b").Times(2))}, 4, 5},
		{"nested", []fake.Step{fake.Repeat(2, fake.Reply("x"), fake.Repeat(3, fake.Reply("y")))}, 2, 6},
		{"func", []fake.Step{fake.Func(func(*llmclient.Call) fake.Step { return fake.Reply("f") }).Times(2)}, 1, 1},
		{"huge but finite", []fake.Step{fake.Repeat(1<<62, fake.Repeat(1<<62, fake.Reply("a")))}, 0, int(^uint(0)>>1) - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fake.New(tt.steps...)
			completeN(p, tt.calls)
			if got := p.Remaining(); got != tt.want {
				t.Errorf("Remaining() = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestRemainingMatchesPlay checks Remaining against what random nested scripts really
// serve, at every point of their run.
func TestRemainingMatchesPlay(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		steps := randomSteps(r, 3)
		p := fake.New(steps...)
		for call := 0; ; call++ {
			want := servable(fake.New(steps...), call)
			if got := p.Remaining(); got != want {
				t.Fatalf("script %d after %d calls: Remaining() = %d, want %d", i, call, got, want)
			}
			if _, err := p.Complete(context.Background(), call0()); errors.Is(err, fake.ErrExhausted) {
				break
			}
		}
	}
}

func call0() *llmclient.Call { return &llmclient.Call{Model: "m"} }

// servable plays skip calls on p, then counts the calls it still serves.
func servable(p *fake.Provider, skip int) int {
	for range skip {
		p.Complete(context.Background(), call0())
	}
	n := 0
	for {
		if _, err := p.Complete(context.Background(), call0()); errors.Is(err, fake.ErrExhausted) {
			return n
		}
		n++
	}
}

// randomSteps builds a finite script of replies and nested repeats.
func randomSteps(r *rand.Rand, depth int) []fake.Step {
	steps := make([]fake.Step, r.IntN(4))
	for i := range steps {
		if depth > 0 && r.IntN(3) == 0 {
			steps[i] = fake.Repeat(r.IntN(4), randomSteps(r, depth-1)...)
		} else {
			steps[i] = fake.Reply(strconv.Itoa(i)).Times(r.IntN(3))
		}
	}
	return steps
}

func TestReset(t *testing.T) {
	p := fake.New(fake.Reply("a"), fake.Repeat(2, fake.Reply("b")))
	equal(t, completeN(p, 4), []string{"a", "b", "b", "exhausted"})
	p.Reset()
	if p.Calls() != 0 || len(p.Requests()) != 0 || p.Remaining() != 3 {
		t.Errorf("after Reset: Calls %d, Requests %d, Remaining %d; want 0, 0, 3",
			p.Calls(), len(p.Requests()), p.Remaining())
	}
	equal(t, completeN(p, 4), []string{"a", "b", "b", "exhausted"})
}

func TestStepsCopiedByNew(t *testing.T) {
	r := fake.Reply("before").ToolCall("1", "f", "{}")
	p := fake.New(r)
	r.ToolCall("2", "g", "{}").Times(5).Reasoning("changed")
	resp, err := p.Complete(context.Background(), call("m"))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || resp.Reasoning != "" {
		t.Errorf("step changed after New leaked into the script: %+v", resp)
	}
	if p.Remaining() != 0 {
		t.Errorf("Remaining() = %d, want 0", p.Remaining())
	}
}

func TestDoneContextTakesNoStep(t *testing.T) {
	p := fake.New(fake.Reply("a"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, stream := range []bool{false, true} {
		var err error
		if stream {
			_, err = p.Stream(ctx, call("m"))
		} else {
			_, err = p.Complete(ctx, call("m"))
		}
		if !errors.Is(err, context.Canceled) || llmclient.ClassOf(err) != failure.Canceled {
			t.Errorf("stream=%v: err = %v, want context.Canceled", stream, err)
		}
	}
	if p.Calls() != 2 || p.Remaining() != 1 {
		t.Errorf("Calls %d, Remaining %d; want 2, 1", p.Calls(), p.Remaining())
	}
	equal(t, completeN(p, 1), []string{"a"})
}

func TestNilCall(t *testing.T) {
	p := fake.New(fake.Reply("a"))
	if _, err := p.Complete(context.Background(), nil); err == nil || llmclient.ClassOf(err) != failure.Unknown {
		t.Errorf("err = %v, want a class unknown error", err)
	}
	if p.Remaining() != 1 {
		t.Error("a nil call took a step")
	}
}

func TestFunc(t *testing.T) {
	var seen []string
	p := fake.New(
		fake.Func(func(c *llmclient.Call) fake.Step {
			seen = append(seen, c.APIKey)
			if c.APIKey == "bad" {
				return fake.Fail(401)
			}
			return fake.Reply("ok from " + c.Model)
		}).Times(3),
		fake.Func(func(*llmclient.Call) fake.Step {
			return fake.Func(func(*llmclient.Call) fake.Step { return fake.Reply("nested") })
		}),
	)
	var got []string
	for _, key := range []string{"good", "bad", "good", "any"} {
		got = append(got, outcome(p.Complete(context.Background(), &llmclient.Call{Model: "m1", APIKey: key})))
	}
	equal(t, got, []string{"ok from m1", "401", "ok from m1", "nested"})
	equal(t, seen, []string{"good", "bad", "good"})
}

func TestFuncMisuse(t *testing.T) {
	var nilReply *fake.ReplyStep
	tests := []struct {
		name string
		f    func(*llmclient.Call) fake.Step
	}{
		{"nil", func(*llmclient.Call) fake.Step { return nil }},
		{"typed nil", func(*llmclient.Call) fake.Step { return nilReply }},
		{"repeat", func(*llmclient.Call) fake.Step { return fake.Repeat(2, fake.Reply("a")) }},
		{"loop", func(*llmclient.Call) fake.Step { return fake.Loop(fake.Reply("a")) }},
		{"nil func", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fake.New(fake.Func(tt.f))
			_, err := p.Complete(context.Background(), call("m"))
			if err == nil || llmclient.ClassOf(err) != failure.Unknown {
				t.Fatalf("err = %v, want a class unknown error", err)
			}
			if errors.Is(err, fake.ErrExhausted) {
				t.Errorf("err = %v, want a misuse error, not exhaustion", err)
			}
		})
	}
}
