package fake_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/ratelimit"
)

func TestReplyComplete(t *testing.T) {
	rl := ratelimit.Status{Tokens: ratelimit.Window{Known: true, Limit: 1000, Remaining: 900}}
	req := &llmclient.Request{Messages: []llmclient.Message{
		llmclient.SystemMessage("12345678"), // 8 bytes
		llmclient.UserMessage("abcd"),       // 4 bytes: 12 bytes, 3 tokens
	}}
	tests := []struct {
		name string
		step *fake.ReplyStep
		want llmclient.Response
	}{
		{"default usage", fake.Reply("hello"), llmclient.Response{
			ID: "fake-1", Model: "m", Text: "hello", FinishReason: finish.Stop, RawFinishReason: "stop",
			Usage: llmclient.Usage{InputTokens: 3, OutputTokens: 2, TotalTokens: 5},
		}},
		{"everything", fake.Reply("hi").Reasoning("think").Refusal("no").Usage(10, 4).
			Finish(finish.Length).RateLimits(rl), llmclient.Response{
			ID: "fake-1", Model: "m", Text: "hi", Reasoning: "think", Refusal: "no",
			FinishReason: finish.Length, RawFinishReason: "length",
			Usage:      llmclient.Usage{InputTokens: 10, OutputTokens: 4, TotalTokens: 14},
			RateLimits: &rl,
		}},
		{"tool calls", fake.Reply("").ToolCall("call_1", "get_weather", `{"city":"Paris"}`).
			ToolCall("call_2", "get_time", `{}`), llmclient.Response{
			ID: "fake-1", Model: "m",
			ToolCalls: []llmclient.ToolCall{
				{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`},
				{ID: "call_2", Name: "get_time", Arguments: `{}`},
			},
			FinishReason: finish.ToolCalls, RawFinishReason: "tool_calls",
			// 11+16 + 8+2 = 37 bytes: 10 tokens.
			Usage: llmclient.Usage{InputTokens: 3, OutputTokens: 10, TotalTokens: 13},
		}},
		{"empty", fake.Reply("").Finish(finish.ContentFilter).Usage(0, 0), llmclient.Response{
			ID: "fake-1", Model: "m", FinishReason: finish.ContentFilter, RawFinishReason: "content_filter",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fake.New(tt.step)
			resp, err := p.Complete(context.Background(), &llmclient.Call{Model: "m", Request: req})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*resp, tt.want) {
				t.Errorf("got  %+v\nwant %+v", *resp, tt.want)
			}
		})
	}
}

func TestReplyFreshEachPlay(t *testing.T) {
	rl := ratelimit.Status{Requests: ratelimit.Window{Known: true, Limit: 5}}
	p := fake.New(fake.Reply("a").ToolCall("1", "f", "{}").RateLimits(rl).Times(2))
	r1, _ := p.Complete(context.Background(), call("m"))
	r1.ToolCalls[0].Name, r1.RateLimits.Requests.Limit = "changed", 0
	r2, _ := p.Complete(context.Background(), call("m"))
	if r2.ToolCalls[0].Name != "f" || r2.RateLimits.Requests.Limit != 5 || r2.ID != "fake-2" {
		t.Errorf("second play = %+v, shares state with the first or has the wrong id", r2)
	}
}

func TestReplyStream(t *testing.T) {
	tests := []struct {
		name string
		step *fake.ReplyStep
		want []string
	}{
		{"text", fake.Reply("hello"), []string{
			`0s text="hello"`,
			`0s finish=stop(stop) usage=1+2=3 id=fake-1 model=m`,
			`0s EOF`,
		}},
		{"one chunk with everything", fake.Reply("x").Reasoning("r").ToolCall("c1", "f", "{}").Usage(5, 6), []string{
			`0s text="x" reasoning="r" tool[0]=c1,f,{}`,
			`0s finish=tool_calls(tool_calls) usage=5+6=11 id=fake-1 model=m`,
			`0s EOF`,
		}},
		{"empty", fake.Reply(""), []string{
			`0s finish=stop(stop) usage=1+0=1 id=fake-1 model=m`,
			`0s EOF`,
		}},
		{"latency", fake.Reply("x").Latency(2 * time.Second), []string{
			`2s text="x"`,
			`2s finish=stop(stop) usage=1+1=2 id=fake-1 model=m`,
			`2s EOF`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := fake.New(tt.step)
				start := time.Now()
				st, err := p.Stream(context.Background(), call("m"))
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				equal(t, timeline(st, start), tt.want)
			})
		})
	}
}

func TestReplyLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Reply("slow").Latency(300 * time.Millisecond))
		start := time.Now()
		resp, err := p.Complete(context.Background(), call("m"))
		if err != nil || resp.Text != "slow" {
			t.Fatalf("Complete = %v, %v", resp, err)
		}
		if took := time.Since(start); took != 300*time.Millisecond {
			t.Errorf("took %v, want 300ms", took)
		}
	})
}

func TestLatencyHonoursContext(t *testing.T) {
	errCause := errors.New("attempt budget spent")
	tests := []struct {
		name   string
		ctx    func() (context.Context, context.CancelFunc)
		stream bool
		want   []error
		class  failure.Class
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Second)
		}, false, []error{context.DeadlineExceeded}, failure.Timeout},
		{"deadline on stream", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Second)
		}, true, []error{context.DeadlineExceeded}, failure.Timeout},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(time.Second, cancel)
			return ctx, cancel
		}, false, []error{context.Canceled}, failure.Canceled},
		{"cause", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithTimeoutCause(context.Background(), time.Second, errCause)
			return ctx, cancel
		}, false, []error{context.DeadlineExceeded, errCause}, failure.Timeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := fake.New(fake.Reply("x").Latency(time.Hour), fake.Reply("next"))
				ctx, cancel := tt.ctx()
				defer cancel()
				start := time.Now()
				var err error
				if tt.stream {
					_, err = p.Stream(ctx, call("m"))
				} else {
					_, err = p.Complete(ctx, call("m"))
				}
				if took := time.Since(start); took != time.Second {
					t.Errorf("returned after %v, want 1s", took)
				}
				for _, w := range tt.want {
					if !errors.Is(err, w) {
						t.Errorf("err = %v, want it to wrap %v", err, w)
					}
				}
				if llmclient.ClassOf(err) != tt.class {
					t.Errorf("class = %v, want %v", llmclient.ClassOf(err), tt.class)
				}
				// The interrupted call used its step.
				equal(t, completeN(p, 1), []string{"next"})
			})
		})
	}
}
