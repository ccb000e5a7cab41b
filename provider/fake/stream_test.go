package fake_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmclient/llmclient"
	"github.com/llmclient/llmclient/dialect"
	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/finish"
	"github.com/llmclient/llmclient/provider/fake"
	"github.com/llmclient/llmclient/ratelimit"
)

func TestStreamTimeline(t *testing.T) {
	reset := fmt.Errorf("read: %w", syscall.ECONNRESET)
	tests := []struct {
		name string
		step *fake.StreamStep
		want []string
	}{
		{"chunks", fake.Stream("Hel", "lo"), []string{
			`0s text="Hel"`,
			`0s text="lo"`,
			`0s finish=stop(stop) usage=1+2=3 id=fake-1 model=m`,
			`0s EOF`,
		}},
		{"no chunks", fake.Stream(), []string{
			`0s finish=stop(stop) usage=1+0=1 id=fake-1 model=m`,
			`0s EOF`,
		}},
		{"finish and usage", fake.Stream("a").Finish(finish.Length).Usage(7, 1), []string{
			`0s text="a"`,
			`0s finish=length(length) usage=7+1=8 id=fake-1 model=m`,
			`0s EOF`,
		}},
		{"chunk delay", fake.Stream("a", "b", "c").ChunkDelay(100 * time.Millisecond), []string{
			`0s text="a"`,
			`100ms text="b"`,
			`200ms text="c"`,
			`200ms finish=stop(stop) usage=1+1=2 id=fake-1 model=m`,
			`200ms EOF`,
		}},
		{"stall first", fake.Stream("a", "b").StallFirst(30 * time.Second), []string{
			`30s text="a"`,
			`30s text="b"`,
			`30s finish=stop(stop) usage=1+1=2 id=fake-1 model=m`,
			`30s EOF`,
		}},
		{"stall first with keep-alives", fake.Stream("Hel", "lo").StallFirst(30 * time.Second).KeepAlive(5 * time.Second), []string{
			`5s keep-alive`,
			`10s keep-alive`,
			`15s keep-alive`,
			`20s keep-alive`,
			`25s keep-alive`,
			`30s text="Hel"`,
			`30s text="lo"`,
			`30s finish=stop(stop) usage=1+2=3 id=fake-1 model=m`,
			`30s EOF`,
		}},
		{"keep-alives only in long waits", fake.Stream("a", "b").ChunkDelay(time.Second).StallAfter(2, 7*time.Second).KeepAlive(3 * time.Second), []string{
			`0s text="a"`,
			`1s text="b"`,
			`4s keep-alive`,
			`7s keep-alive`,
			`8s finish=stop(stop) usage=1+1=2 id=fake-1 model=m`,
			`8s EOF`,
		}},
		{"stall mid-stream on top of delay", fake.Stream("a", "b", "c").ChunkDelay(time.Second).StallAfter(1, 10*time.Second), []string{
			`0s text="a"`,
			`11s text="b"`,
			`12s text="c"`,
			`12s finish=stop(stop) usage=1+1=2 id=fake-1 model=m`,
			`12s EOF`,
		}},
		{"stall set twice", fake.Stream("a").StallFirst(time.Second).StallFirst(2 * time.Second), []string{
			`2s text="a"`,
			`2s finish=stop(stop) usage=1+1=2 id=fake-1 model=m`,
			`2s EOF`,
		}},
		{"cut before first token", fake.Stream("a", "b").StallFirst(10 * time.Second).CutAfter(0), []string{
			`10s error fake: stream cut after 0 chunks: unexpected EOF`,
		}},
		{"cut mid-stream", fake.Stream("a", "b", "c").ChunkDelay(100 * time.Millisecond).CutAfter(1), []string{
			`0s text="a"`,
			`100ms error fake: stream cut after 1 chunks: unexpected EOF`,
		}},
		{"cut before end marker", fake.Stream("a", "b").CutAfter(9), []string{
			`0s text="a"`,
			`0s text="b"`,
			`0s error fake: stream cut after 2 chunks: unexpected EOF`,
		}},
		{"in-band error before first token", fake.Stream("a").FailAfter(0, fake.Fail(529).Type("overloaded_error")), []string{
			`0s error llmclient: overloaded: status 529: overloaded_error: fake: status 529`,
		}},
		{"in-band error mid-stream", fake.Stream("a", "b").FailAfter(1, fake.FailClass(failure.QuotaExhausted).Code("insufficient_quota")), []string{
			`0s text="a"`,
			`0s error llmclient: quota_exhausted: status 429: insufficient_quota: fake: status 429`,
		}},
		{"transport error mid-stream", fake.Stream("a", "b").ChunkDelay(time.Second).ErrorAfter(1, reset), []string{
			`0s text="a"`,
			`1s error read: connection reset by peer`,
		}},
		{"last ending wins", fake.Stream("a", "b").FailAfter(0, fake.Fail(500)).CutAfter(1), []string{
			`0s text="a"`,
			`0s error fake: stream cut after 1 chunks: unexpected EOF`,
		}},
		{"chunks as given", fake.StreamChunks(
			llmclient.Chunk{Reasoning: "hmm"},
			llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 0, ID: "c1", Name: "f", Arguments: `{"a":`}}},
			llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 0, Arguments: `1}`}}},
		), []string{
			`0s reasoning="hmm"`,
			`0s tool[0]=c1,f,{"a":`,
			`0s tool[0]=,,1}`,
			`0s finish=tool_calls(tool_calls) usage=1+3=4 id=fake-1 model=m`,
			`0s EOF`,
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

func TestStreamErrors(t *testing.T) {
	reset := fmt.Errorf("read: %w", syscall.ECONNRESET)
	tests := []struct {
		name  string
		step  *fake.StreamStep
		is    error
		class failure.Class
	}{
		{"cut", fake.Stream("a").CutAfter(1), io.ErrUnexpectedEOF, failure.Network},
		{"fail", fake.Stream("a").FailAfter(1, fake.Fail(529)), nil, failure.Overloaded},
		{"error", fake.Stream("a").ErrorAfter(0, reset), syscall.ECONNRESET, failure.Network},
		{"nil fail", fake.Stream("a").FailAfter(0, nil), nil, failure.Unknown},
		{"nil error", fake.Stream("a").ErrorAfter(0, nil), nil, failure.Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fake.New(tt.step.Times(2))
			st, err := p.Stream(context.Background(), call("m"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var last error
			for last == nil {
				_, last = st.Recv()
			}
			if last == io.EOF || (tt.is != nil && !errors.Is(last, tt.is)) || llmclient.ClassOf(last) != tt.class {
				t.Errorf("Recv err = %v (class %v), want %v of class %v", last, llmclient.ClassOf(last), tt.is, tt.class)
			}
			if _, again := st.Recv(); again != last {
				t.Errorf("Recv after the error = %v, want the same error", again)
			}
			// Complete reads the same stream and returns its error.
			if _, err := p.Complete(context.Background(), call("m")); llmclient.ClassOf(err) != tt.class {
				t.Errorf("Complete err = %v, want class %v", err, tt.class)
			}
		})
	}
}

func TestStreamEOFRepeats(t *testing.T) {
	st, err := fake.New(fake.Stream("a")).Stream(context.Background(), call("m"))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		st.Recv()
	}
	for range 2 {
		if _, err := st.Recv(); err != io.EOF {
			t.Errorf("Recv after the end = %v, want io.EOF", err)
		}
	}
	st.Close()
}

func TestStreamOnComplete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rl := ratelimit.Status{Requests: ratelimit.Window{Known: true, Remaining: 3}}
		p := fake.New(
			fake.Stream("Hel", "lo").Latency(time.Second).StallFirst(2*time.Second).ChunkDelay(time.Second).KeepAlive(time.Second).RateLimits(rl),
			fake.StreamChunks(
				llmclient.Chunk{Reasoning: "a"},
				llmclient.Chunk{Reasoning: "b", Text: "x"},
				llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 3, ID: "c3", Name: "f", Arguments: "{"}, {Index: 1, ID: "c1", Name: "g", Arguments: "[]"}}},
				llmclient.Chunk{ToolCalls: []dialect.ToolCallDelta{{Index: 3, Arguments: "}"}}},
				llmclient.Chunk{Refusal: "no"},
			).Usage(3, 4),
		)
		start := time.Now()
		resp, err := p.Complete(context.Background(), call("m"))
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != 4*time.Second {
			t.Errorf("took %v, want 4s (latency + stall + delay)", took)
		}
		if resp.Text != "Hello" || resp.FinishReason != finish.Stop || resp.ID != "fake-1" ||
			resp.Model != "m" || resp.Usage.OutputTokens != 2 || resp.RateLimits == nil || *resp.RateLimits != rl {
			t.Errorf("resp = %+v", resp)
		}

		resp, err = p.Complete(context.Background(), call("m"))
		if err != nil {
			t.Fatal(err)
		}
		want := []llmclient.ToolCall{{ID: "c3", Name: "f", Arguments: "{}"}, {ID: "c1", Name: "g", Arguments: "[]"}}
		if resp.Text != "x" || resp.Reasoning != "ab" || resp.Refusal != "no" || fmt.Sprint(resp.ToolCalls) != fmt.Sprint(want) ||
			resp.FinishReason != finish.ToolCalls || resp.Usage.TotalTokens != 7 || resp.RateLimits != nil {
			t.Errorf("resp = %+v", resp)
		}
	})
}

func TestStreamLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Stream("a").Latency(700 * time.Millisecond).StallFirst(time.Second))
		start := time.Now()
		st, err := p.Stream(context.Background(), call("m"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if took := time.Since(start); took != 700*time.Millisecond {
			t.Errorf("Stream returned after %v, want 700ms", took)
		}
		if c, _ := st.Recv(); c.Text != "a" || time.Since(start) != 1700*time.Millisecond {
			t.Errorf("first chunk %q at %v, want \"a\" at 1.7s", c.Text, time.Since(start))
		}
	})
}

func TestCloseUnblocksRecv(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Stream("a").StallFirst(time.Hour).KeepAlive(time.Minute))
		st, err := p.Stream(context.Background(), call("m"))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		errc := make(chan error)
		go func() {
			for {
				c, err := st.Recv()
				if err != nil {
					errc <- err
					return
				}
				if !c.KeepAlive {
					errc <- fmt.Errorf("got a content chunk %+v", c)
					return
				}
			}
		}()
		time.Sleep(90 * time.Second)
		synctest.Wait()
		if err := st.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
		if err := <-errc; !errors.Is(err, fake.ErrClosed) {
			t.Errorf("Recv after Close = %v, want ErrClosed", err)
		}
		if took := time.Since(start); took != 90*time.Second {
			t.Errorf("Recv returned at %v, want 90s", took)
		}
		if err := st.Close(); err != nil {
			t.Errorf("second Close = %v", err)
		}
		if _, err := st.Recv(); !errors.Is(err, fake.ErrClosed) {
			t.Errorf("Recv on a closed stream = %v, want ErrClosed", err)
		}
	})
}

func TestContextUnblocksRecv(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := fake.New(fake.Stream("a", "b").ChunkDelay(time.Hour))
		ctx, cancel := context.WithCancel(context.Background())
		st, err := p.Stream(ctx, call("m"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if c, err := st.Recv(); err != nil || c.Text != "a" {
			t.Fatalf("first Recv = %+v, %v", c, err)
		}
		start := time.Now()
		time.AfterFunc(2*time.Second, cancel)
		_, err = st.Recv()
		if !errors.Is(err, context.Canceled) || time.Since(start) != 2*time.Second {
			t.Errorf("Recv = %v after %v, want context.Canceled after 2s", err, time.Since(start))
		}
		if _, err := st.Recv(); !errors.Is(err, context.Canceled) {
			t.Errorf("Recv after cancel = %v, want context.Canceled", err)
		}
	})
}

// TestContextDoneBeforeReady checks that a done context fails Recv even when the next
// chunk needs no wait, as a body read on a canceled request does.
func TestContextDoneBeforeReady(t *testing.T) {
	p := fake.New(fake.Stream("a", "b"))
	ctx, cancel := context.WithCancel(context.Background())
	st, err := p.Stream(ctx, call("m"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cancel()
	if _, err := st.Recv(); !errors.Is(err, context.Canceled) {
		t.Errorf("Recv = %v, want context.Canceled", err)
	}
}

func TestStreamChunksIsolated(t *testing.T) {
	chunks := []llmclient.Chunk{{ToolCalls: []dialect.ToolCallDelta{{ID: "c1", Name: "f"}}}}
	p := fake.New(fake.StreamChunks(chunks...).Times(2))
	chunks[0].ToolCalls[0].Name = "changed before play"
	for i := range 2 {
		st, err := p.Stream(context.Background(), call("m"))
		if err != nil {
			t.Fatal(err)
		}
		c, _ := st.Recv()
		if c.ToolCalls[0].Name != "f" {
			t.Errorf("play %d: tool name %q, want f", i, c.ToolCalls[0].Name)
		}
		c.ToolCalls[0].Name = "changed by caller"
		st.Close()
	}
}
